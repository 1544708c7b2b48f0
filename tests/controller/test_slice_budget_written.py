"""The time a StatefulSet's scale-up slice carries from the slice it replaces is written with its
admission (status.accumulatedPastExecutionTimeSeconds), so the engine that reads it back from the
API keeps the original deadline; an elastic Job's slice is admitted with none (engine:
tests/engine/test_slice_budget.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from kqueue.api.v1alpha1 import constants as c
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_scheduler import NOW, Obj, is_evicted, key, make, workload

LIMIT = 300


@dataclass(frozen=True)
class Owner:
    api_version: str
    kind: str
    # status.accumulatedPastExecutionTimeSeconds of the replacement after 100 s (None: unset)
    # and its deadline, in seconds after the old slice's admission.
    want_written: int | None
    want_deadline: int


OWNERS = [
    Owner("apps/v1", "StatefulSet", want_written=100, want_deadline=LIMIT),
    Owner("batch/v1", "Job", want_written=None, want_deadline=100 + LIMIT),
]


def slice_of(name: str, cpu: str, owner: Owner, *, replaces: str | None = None) -> Obj:
    obj = workload(name, cpu)
    obj["spec"]["maximumExecutionTimeSeconds"] = LIMIT
    obj["metadata"]["ownerReferences"] = [{
        "apiVersion": owner.api_version, "kind": owner.kind, "name": "db", "uid": "owner-uid",
        "controller": True, "blockOwnerDeletion": True,
    }]
    if replaces is not None:
        obj["metadata"]["annotations"] = {
            c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION: str(key(replaces))
        }
    return obj


@pytest.mark.parametrize("owner", OWNERS, ids=[o.kind for o in OWNERS])
async def test_a_scale_up_slice_is_written_with_the_time_it_carries(
    cluster: FakeCluster, owner: Owner
) -> None:
    clock = [NOW]
    scheduler, api, _, engine = make(cluster, cpu="4", now=lambda: clock[0])
    api.create(slice_of("s1", "1", owner))
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert api.admitted() == {key("s1")}

    clock[0] = NOW + timedelta(seconds=100)
    api.create(slice_of("s2", "2", owner, replaces="s1"))
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()  # the engine now reads s2 as the API holds it
    assert engine.holds_quota(key("s2")) and not engine.holds_quota(key("s1"))
    status = api.objects[key("s2")]["status"]
    assert status.get("accumulatedPastExecutionTimeSeconds") == owner.want_written
    deadline = NOW + timedelta(seconds=owner.want_deadline)
    assert engine.next_deadline() == deadline

    clock[0] = deadline - timedelta(seconds=1)
    await scheduler.run_once()
    await scheduler.drain()
    assert not is_evicted(api.objects[key("s2")])
    clock[0] = deadline
    await scheduler.run_once()
    await scheduler.drain()
    evicted = next(
        cond for cond in api.objects[key("s2")]["status"]["conditions"]
        if cond["type"] == c.EVICTED
    )
    assert (evicted["status"], evicted["reason"]) == (
        "True", "DeactivatedDueToMaximumExecutionTimeExceeded"
    )
