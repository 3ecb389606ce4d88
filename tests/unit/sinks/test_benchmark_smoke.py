"""The funnel benchmark runs end to end on a tiny journal (the real run is benchmarks/, not the suite)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "archive_funnel.py"


def test_benchmark_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("archive_funnel", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--rows", "10000", "--tenants", "2", "--days", "2", "--spans", "1000,5000",
                           "--runs", "1", "--root", str(tmp_path)])
    assert [r["span"] for r in results] == [1000, 5000]
    assert all(r["files"] > 0 and r["funnel_rows"] > 0 and r["ours_ratio"] > 0 for r in results)
