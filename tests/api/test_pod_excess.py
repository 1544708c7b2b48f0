"""A pod group's excess pods: beyond its total count before its Workload exists, beyond each pod
set's (role's) count in the Workload once it does (Kueue's ConstructComposableWorkload and
FindMatchingWorkloads, ``removeExcessPods``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kqueue.api.integrations import role_hash
from kqueue.api.integrations.pod import group_excess, member_pod_set
from kqueue.api.v1alpha1 import PodSet
from kqueue.api.v1alpha1 import constants as c
from tests.api.test_integrations import make_pod

Obj = dict[str, Any]

# Two roles: pods of a different shape hash to a different pod set.
LEADER, WORKER = "2", "1"


@dataclass(frozen=True)
class Member:
    name: str
    minute: int
    cpu: str = WORKER
    gated: bool = True
    finalizer: bool = True
    phase: str = "Pending"
    deleting: bool = False
    # Released by kqueue onto a flavor: its node labels and toleration added, the gate gone.
    flavored: bool = False


def _pod(m: Member, total: int) -> Obj:
    p = make_pod(
        m.name, cpu=m.cpu, group="g", total=total, phase=m.phase,
        created=f"2024-01-01T00:{m.minute:02d}:00Z",
    )
    if m.gated:
        p["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    if m.finalizer:
        p["metadata"]["finalizers"] = [c.MANAGED_FINALIZER]
    if m.deleting:
        p["metadata"]["deletionTimestamp"] = "2024-01-01T01:00:00Z"
    if m.flavored:
        p["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        p["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    return p


def role(cpu: str) -> str:
    return role_hash(make_pod("x", cpu=cpu, group="g", total=1))


def pod_set(cpu: str, count: int) -> PodSet:
    """The Workload's pod set of a role, its template the role's spec as the pods were made."""
    spec = make_pod("x", cpu=cpu, group="g", total=1)["spec"]
    return PodSet.model_validate({"name": role(cpu), "count": count, "template": {"spec": spec}})


@dataclass(frozen=True)
class Case:
    name: str
    total: int
    members: tuple[Member, ...]
    # The Workload's pod sets, (cpu of the role, count); None: no Workload yet.
    pod_sets: tuple[tuple[str, int], ...] | None
    # (pod, its pod set's cpu or None for the total count, count, active pods counted).
    excess: tuple[tuple[str, str | None, int, int], ...]


# Kueue's pod_controller_test.go TestReconciler cases by name (their pods and Workloads, the
# pods Kueue deletes), and kqueue's own.
CASES = [
    Case("excess pods before wl creation, youngest pods are deleted", total=1,
         members=(Member("pod", 0), Member("pod2", 1)), pod_sets=None,
         excess=(("pod2", None, 1, 2),)),
    Case("excess pods before admission, youngest pods are deleted", total=2,
         members=(Member("pod", 0), Member("pod2", 1), Member("pod3", 2)),
         pod_sets=((WORKER, 2),), excess=(("pod3", WORKER, 2, 3),)),
    # The group's total count (2) equals its active pods, but one role is absent and the other
    # has one pod too many.
    Case("excess pods in pod set after admission, youngest pods are deleted", total=2,
         members=(Member("pod", 0, gated=False), Member("pod2", 2)),
         pod_sets=((LEADER, 1), (WORKER, 1)), excess=(("pod2", WORKER, 1, 2),)),
    Case("delete excess pod that is gated", total=2,
         members=(Member("pod", 0, gated=False), Member("pod2", 1, gated=False),
                  Member("pod3", 1)),
         pod_sets=((WORKER, 2),), excess=(("pod3", WORKER, 2, 3),)),
    # Deleted, unbound, its finalizer someone else's: not active, so not excess.
    Case("deletion of excess pod is blocked by another controller", total=1,
         members=(Member("pod", 0), Member("pod2", 1, finalizer=False, deleting=True)),
         pod_sets=None, excess=()),
    # The brief's shape: total 3 as 1 leader + 2 workers; 2 leaders and 1 worker active (a
    # worker failed, a leader-shaped pod came instead). Within the total count, one leader over.
    Case("a leader beyond its pod set's count is excess although the group is within its total",
         total=3,
         members=(Member("l-0", 0, cpu=LEADER, gated=False), Member("w-0", 1, gated=False),
                  Member("w-1", 2, phase="Failed"), Member("l-1", 3, cpu=LEADER)),
         pod_sets=((LEADER, 1), (WORKER, 2)), excess=(("l-1", LEADER, 1, 2),)),
    # The same, the running pods released onto a flavor with node labels and a toleration:
    # their hash changed, their role did not.
    Case("a leader beyond its pod set's count is excess after a release onto a labelled flavor",
         total=3,
         members=(Member("l-0", 0, cpu=LEADER, gated=False, flavored=True),
                  Member("w-0", 1, gated=False, flavored=True),
                  Member("w-1", 2, phase="Failed", gated=False, flavored=True),
                  Member("l-1", 3, cpu=LEADER)),
         pod_sets=((LEADER, 1), (WORKER, 2)), excess=(("l-1", LEADER, 1, 2),)),
    # Kept first: kqueue's finalizer, then ungated, then older.
    Case("the pod without kqueue's finalizer is the excess one, though the oldest", total=2,
         members=(Member("a", 0, finalizer=False), Member("b", 1), Member("c", 2)),
         pod_sets=((WORKER, 2),), excess=(("a", WORKER, 2, 3),)),
    Case("a failed pod's replacement of its own role is not excess", total=2,
         members=(Member("l-0", 0, cpu=LEADER, phase="Failed"), Member("w-0", 1),
                  Member("l-1", 2, cpu=LEADER)),
         pod_sets=((LEADER, 1), (WORKER, 1)), excess=()),
    # As Kueue: a pod of a role the Workload has no pod set for is not counted in a pod set;
    # within the group's total count it is neither kept nor deleted.
    Case("a pod of a role the workload lacks is not counted", total=3,
         members=(Member("l-0", 0, cpu=LEADER), Member("w-0", 1), Member("x", 2, cpu="3")),
         pod_sets=((LEADER, 1), (WORKER, 1)), excess=()),
    # Kept gated, a stray beyond the total count would stall the gang: it goes, as it did
    # before the Workload existed (counted against the total count, no pod set). kqueue's own:
    # Kueue rebuilds the Workload instead.
    Case("a pod of a role the workload lacks beyond the total count is excess", total=2,
         members=(Member("l-0", 0, cpu=LEADER), Member("w-0", 1), Member("x", 2, cpu="3")),
         pod_sets=((LEADER, 1), (WORKER, 1)), excess=(("x", None, 2, 3),)),
    Case("a stray beyond what the pod sets leave of the total count is excess", total=2,
         members=(Member("l-0", 0, cpu=LEADER), Member("w-0", 1), Member("x", 2, cpu="3"),
                  Member("y", 3, cpu="3")),
         pod_sets=((LEADER, 1), (WORKER, 1)), excess=(("x", None, 2, 4), ("y", None, 2, 4))),
    # One pod set holds every pod of the group, whatever its role (as kqueue releases them).
    Case("a one-pod-set workload counts every role in it", total=2,
         members=(Member("w-0", 0), Member("w-1", 1), Member("l-0", 2, cpu=LEADER)),
         pod_sets=((WORKER, 2),), excess=(("l-0", WORKER, 2, 3),)),
    Case("every role within its count: no excess", total=3,
         members=(Member("l-0", 0, cpu=LEADER), Member("w-0", 1), Member("w-1", 2)),
         pod_sets=((LEADER, 1), (WORKER, 2)), excess=()),
]


@pytest.mark.parametrize("case", CASES, ids=lambda k: k.name)
def test_excess_pods_of_a_group(case: Case) -> None:
    pods = [_pod(m, case.total) for m in case.members]
    sets = None if case.pod_sets is None else [pod_set(cpu, n) for cpu, n in case.pod_sets]

    got = [
        (str(e.pod["metadata"]["name"]), e.pod_set, e.count, e.active)
        for e in group_excess(pods, sets)
    ]

    want = [(n, role(cpu) if cpu is not None else None, k, a) for n, cpu, k, a in case.excess]
    assert got == want


def test_a_pod_counts_in_its_role_s_pod_set_or_the_only_one() -> None:
    leader = make_pod("l", cpu=LEADER, group="g", total=2)
    assert member_pod_set(leader, [pod_set(WORKER, 1), pod_set(LEADER, 1)]) == role(LEADER)
    assert member_pod_set(leader, [pod_set(WORKER, 2)]) == role(WORKER)


def test_a_released_pod_keeps_its_role_though_its_flavor_changed_its_hash() -> None:
    released = _pod(Member("l", 0, cpu=LEADER, gated=False, flavored=True), 2)
    assert role_hash(released) not in (role(LEADER), role(WORKER))
    assert member_pod_set(released, [pod_set(WORKER, 1), pod_set(LEADER, 1)]) == role(LEADER)
