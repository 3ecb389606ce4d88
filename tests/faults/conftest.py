"""The fault suite: every test here is marked `faults` (and `integration` when it needs the broker).

Size: CI runs the small size; `--faults-size=large` or CREDENCE_FAULTS_SIZE=large selects the large one
(the numbers the closing notes quote). Sizes are parameters of the tests, never separate tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.sizes import Size, size_named

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().parent == HERE:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session")
def faults_size(pytestconfig) -> Size:
    return size_named(pytestconfig.getoption("faults_size", default=None))


@pytest.fixture(scope="session")
def restart_lines(faults_size) -> list[bytes]:
    """The input of the broker-restart and scale-out runs (one reference run serves both)."""
    from tests.faults.conversations import conversations

    return conversations(faults_size.restart_turns, faults_size.restart_scopes, faults_size.seed + 1)


@pytest.fixture(scope="session")
def restart_cuts(restart_lines) -> tuple[int, int]:
    """Where the broker-restart and scale-out runs cut their input into three pieces: each fault lands
    before the last piece is produced, and each piece goes out once the input before it has settled
    (harness.settle), in the reference run too."""
    return len(restart_lines) // 3, 2 * len(restart_lines) // 3


@pytest.fixture(scope="session")
def restart_reference(restart_lines, restart_cuts, faults_size, kafka_bootstrap, tmp_path_factory):
    from tests.faults.harness import deadline_for, reference_run

    root = tmp_path_factory.mktemp("restart-reference")
    return reference_run(kafka_bootstrap, root, restart_lines, deadline_for(faults_size.restart_turns), restart_cuts)
