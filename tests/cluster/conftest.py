"""Shared by the secured, outage and replicated-cluster tests: one undisturbed run of the same input on
the suite's single PLAINTEXT broker, the reference their end states must equal."""

from __future__ import annotations

import uuid

import pytest

from tests.support.pipeline import CLUSTER_LINES, RunResult, pipeline_settings, run_pipeline


@pytest.fixture(scope="session")
def reference(kafka_bootstrap, tmp_path_factory) -> RunResult:
    root = tmp_path_factory.mktemp("reference")
    settings = pipeline_settings(kafka_bootstrap, root, f"r{uuid.uuid4().hex[:10]}")
    # compared by what it collected only: its worker is discarded, not stopped
    return run_pipeline(settings, kafka_bootstrap, CLUSTER_LINES, root / "worker.log", then_discard=True)
