"""preemptionOrder: LeastWorkLost (docs/concepts.md, "Preemption protection"): among otherwise
equal victims, the one that loses the least work goes first, counted from its last checkpoint
(annotation kqueue.io/last-checkpoint-time) or else its admission."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1 import parse_object
from kqueue.engine import from_api
from kqueue.engine.preemption.search import candidate_order
from kqueue.engine.types import EPOCH, Admission, ClusterQueueName, PreemptionOrder
from kqueue.engine.workload import AdmittedWorkload, make_info

from .conftest import simulate_json

SCENARIO = Path(__file__).parent / "least_work_lost" / "within-queue.yaml"


def _victims(order: str | None, checkpoint: str | None = "2024-01-01T00:01:40Z") -> list[str]:
    docs = [d for d in yaml.safe_load_all(SCENARIO.read_text()) if d]
    for d in docs:
        if d["kind"] == "ClusterQueue":
            if order is None:
                del d["spec"]["preemption"]["preemptionOrder"]
            else:
                d["spec"]["preemption"]["preemptionOrder"] = order
        if d["kind"] == "Workload" and d["metadata"]["name"] == "early":
            if checkpoint is None:
                del d["metadata"]["annotations"][c.LAST_CHECKPOINT_TIME_ANNOTATION]
            else:
                d["metadata"]["annotations"][c.LAST_CHECKPOINT_TIME_ANNOTATION] = checkpoint
    out = simulate_json(
        "-", "--start", "2024-01-01T00:00:00Z", "--until", "10m",
        input=yaml.safe_dump_all(docs),
    )
    return [e["workload"] for e in out["events"] if e["type"] == "Preempted"]


def test_least_work_lost_evicts_the_workload_checkpointed_last() -> None:
    assert _victims("LeastWorkLost") == ["prod/early"]


def test_newest_evicts_the_workload_admitted_last() -> None:
    assert _victims("Newest") == ["prod/late"]
    assert _victims(None) == ["prod/late"]


@pytest.mark.parametrize(
    "checkpoint",
    [
        pytest.param(None, id="no checkpoint"),
        pytest.param("2023-12-31T23:00:00Z", id="checkpoint of an earlier run"),
        pytest.param("not a time", id="unreadable checkpoint ignored"),
    ],
)
def test_least_work_lost_without_a_usable_checkpoint_counts_from_admission(
    checkpoint: str | None,
) -> None:
    assert _victims("LeastWorkLost", checkpoint) == ["prod/late"]


def _admitted(name: str, admitted_s: int, checkpoint_s: int | None) -> AdmittedWorkload:
    annotations = {}
    if checkpoint_s is not None:
        at = EPOCH + timedelta(seconds=checkpoint_s)
        annotations[c.LAST_CHECKPOINT_TIME_ANNOTATION] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    api: Any = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": annotations},
        "spec": {"queueName": "q", "podSets": [{
            "name": "main", "count": 1,
            "template": {"spec": {"containers": [{"name": "c"}]}},
        }]},
    })
    at = EPOCH + timedelta(seconds=admitted_s)
    admission = Admission(ClusterQueueName("cq"), (), reserved_at=at, admitted_at=at)
    return AdmittedWorkload.of(make_info(from_api.workload(api), {}), admission)


def test_candidate_order_least_work_lost() -> None:
    a = _admitted("a", 0, 50)  # checkpointed at 50s: loses the least
    b = _admitted("b", 30, None)  # admitted at 30s
    old = _admitted("old", 10, 5)  # its checkpoint predates its admission: from 10s

    def order(o: PreemptionOrder) -> list[str]:
        key = lambda w: candidate_order(w, evicting=False, group=0, order=o)  # noqa: E731
        return [w.info.obj.name for w in sorted([old, b, a], key=key)]

    assert order(PreemptionOrder.LEAST_WORK_LOST) == ["a", "b", "old"]
    assert order(PreemptionOrder.NEWEST) == ["b", "old", "a"]
    assert order(PreemptionOrder.OLDEST) == ["a", "old", "b"]
