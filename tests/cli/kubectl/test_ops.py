"""The patches of stop and resume (kueuectl's): stopPolicy for queues, active for workloads."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.cli.kubectl.ops import _unchanged, resume_patch, stop_patch


@pytest.mark.parametrize(
    ("kind", "keep", "want"),
    [
        pytest.param(
            "clusterqueues",
            False,
            {"spec": {"stopPolicy": "HoldAndDrain"}},
            id="stop cq: drain by default",
        ),
        pytest.param(
            "clusterqueues",
            True,
            {"spec": {"stopPolicy": "Hold"}},
            id="stop cq --keep-already-running",
        ),
        pytest.param("localqueues", False, {"spec": {"stopPolicy": "HoldAndDrain"}}, id="stop lq"),
        pytest.param(
            "localqueues",
            True,
            {"spec": {"stopPolicy": "Hold"}},
            id="stop lq --keep-already-running",
        ),
        pytest.param(
            "workloads", False, {"spec": {"active": False}}, id="stop workload: deactivate"
        ),
    ],
)
def test_stop_patch(kind: str, keep: bool, want: dict[str, Any]) -> None:
    assert stop_patch(kind, keep_already_running=keep) == want


@pytest.mark.parametrize(
    ("kind", "want"),
    [
        pytest.param("clusterqueues", {"spec": {"stopPolicy": "None"}}, id="resume cq"),
        pytest.param("localqueues", {"spec": {"stopPolicy": "None"}}, id="resume lq"),
        pytest.param("workloads", {"spec": {"active": True}}, id="resume workload"),
    ],
)
def test_resume_patch(kind: str, want: dict[str, Any]) -> None:
    assert resume_patch(kind) == want


@pytest.mark.parametrize(
    ("obj", "patch", "want"),
    [
        pytest.param({"spec": {}}, resume_patch("clusterqueues"), True, id="no stopPolicy is None"),
        pytest.param(
            {"spec": {"stopPolicy": "Hold"}},
            resume_patch("clusterqueues"),
            False,
            id="held queue resumed",
        ),
        pytest.param(
            {"spec": {"stopPolicy": "Hold"}},
            stop_patch("clusterqueues"),
            False,
            id="Hold to HoldAndDrain",
        ),
        pytest.param({"spec": {}}, resume_patch("workloads"), True, id="no active is true"),
        pytest.param(
            {"spec": {"active": False}}, stop_patch("workloads"), True, id="already inactive"
        ),
    ],
)
def test_unchanged(obj: dict[str, Any], patch: dict[str, Any], want: bool) -> None:
    assert _unchanged(obj, patch) is want
