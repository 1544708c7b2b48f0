"""How `make test` shares the suite among pytest-xdist workers (tests/fixtures/distribution.py):
a control plane a directory starts for itself is started by one worker, and an operator that
binds a host-wide port runs on one worker at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.distribution import HOST_RESOURCES_UNIT, work_unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/engine/test_kueue_parity_tas.py::test_x[a]", "tests/engine/test_kueue_parity_tas.py"),
        ("tests/controller_e2e/test_ray.py::test_rayjob_full_life", "tests/controller_e2e/test_ray.py"),
        ("tests/gang_e2e/test_gang.py::test_x", "tests/gang_e2e"),
        ("tests/gang_e2e/test_gang_apps.py::test_x", "tests/gang_e2e"),
        ("tests/gang_e2e/preemption/test_scheduler_preemption.py::test_x", "tests/gang_e2e/preemption"),
        ("tests/stock_e2e/test_node_fit.py::test_x", "tests/stock_e2e"),
        # mpi-operator always binds :8080: every file that starts it is one unit
        ("tests/controller_e2e/test_mpijob.py::test_mpijob_full_life", HOST_RESOURCES_UNIT),
        ("tests/gang_e2e/test_gang_operators.py::test_x", HOST_RESOURCES_UNIT),
        ("tests/cluster/test_operators.py::test_x", HOST_RESOURCES_UNIT),
    ],
)
def test_work_unit(nodeid: str, unit: str) -> None:
    assert (ROOT / nodeid.split("::")[0]).is_file(), nodeid
    assert work_unit(ROOT, nodeid) == unit
