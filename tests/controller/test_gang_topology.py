"""The topology hand-off (``topologyHandOff``), without a cluster: which workloads' PodGroups
get ``schedulingConstraints.topology``, what is learnt when the API server refuses or drops the
field, and when the pods go without their TAS domain's node selector."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload
from kqueue.controller.gang import PODGROUPS, PODGROUPS_V1BETA1, GangPlacement
from kqueue.controller.gang_topology import TopologyHandOff, constraint_key
from kqueue.controller.resources import WORKLOADS
from tests.controller.fake_apiserver import FakeCluster, Refused
from tests.controller.fakes import Events
from tests.controller.test_gang import NOW, _with_group
from tests.controller.test_job_reconciler import gated_pods, job, workload

Obj = dict[str, Any]

RACK = "cloud.example.com/rack"
HOST = "kubernetes.io/hostname"


def _assignment(hosts: list[str]) -> Obj:
    return {
        "levels": [HOST],
        "slices": [{
            "domainCount": len(hosts),
            "valuesPerLevel": [{"individual": {"roots": hosts}}] if len(hosts) > 1
            else [{"universal": hosts[0]}],
            "podCounts": {"universal": 1},
        }],
    }


def _tas_workload(
    requests: list[Obj | None], *, assigned: bool = True, levels: list[str] | None = None
) -> Workload:
    """A Job's Workload admitted with one pod set per entry of ``requests`` (its
    ``topologyRequest``, None: none), each of 2 pods, TAS-assigned unless ``assigned`` is
    False."""
    j = job("train", count=2)
    doc = workload(j, admitted=2).to_dict()
    base_set = doc["spec"]["podSets"][0]
    base_psa = doc["status"]["admission"]["podSetAssignments"][0]
    doc["spec"]["podSets"], doc["status"]["admission"]["podSetAssignments"] = [], []
    for i, request in enumerate(requests):
        name = base_set["name"] if i == 0 else f"set-{i}"
        pod_set = {**base_set, "name": name}
        if request is not None:
            pod_set["topologyRequest"] = request
        psa = {**base_psa, "name": name}
        if assigned and levels:
            psa["topologyAssignment"] = {
                "levels": levels,
                "slices": [{"domainCount": 1,
                            "valuesPerLevel": [{"universal": f"v{k}"} for k in range(len(levels))],
                            "podCounts": {"universal": 2}}],
            }
        elif assigned:
            psa["topologyAssignment"] = _assignment([f"n{i}a", f"n{i}b"])
        doc["spec"]["podSets"].append(pod_set)
        doc["status"]["admission"]["podSetAssignments"].append(psa)
    return Workload.model_validate(doc)


KEY_CASES = [
    # (name, pod sets' topology requests, TAS-assigned, expected key)
    ("required rack: the rack level", [{"required": RACK}], True, RACK),
    ("preferred rack: may spread, none", [{"preferred": RACK}], True, None),
    ("unconstrained: none", [{"unconstrained": True}], True, None),
    ("no request (not TAS): none", [None], False, None),
    ("required but no assignment: none", [{"required": RACK}], False, None),
    (
        "two pod sets of one group, same level: the level",
        [{"required": RACK, "podSetGroupName": "g"}, {"required": RACK, "podSetGroupName": "g"}],
        True,
        RACK,
    ),
    (
        "two pod sets, no group: each its own rack, none",
        [{"required": RACK}, {"required": RACK}],
        True,
        None,
    ),
    (
        "two pod sets of one group, different levels: none",
        [{"required": RACK, "podSetGroupName": "g"}, {"required": HOST, "podSetGroupName": "g"}],
        True,
        None,
    ),
    (
        "one required pod set, one without a request: none",
        [{"required": RACK}, None],
        True,
        None,
    ),
]


@pytest.mark.parametrize(
    ("requests", "assigned", "want"), [pytest.param(*case[1:], id=case[0]) for case in KEY_CASES]
)
def test_constraint_key_only_where_the_admission_keeps_the_gang_in_one_domain(
    requests: list[Obj | None], assigned: bool, want: str | None
) -> None:
    assert constraint_key(_tas_workload(requests, assigned=assigned)) == want


def test_no_constraint_without_an_admission() -> None:
    j = job("train", count=2)
    assert constraint_key(workload(j)) is None


def _placement(
    cluster: FakeCluster, mode: TopologyHandOff, *, v1beta1: bool = True,
    events: Events | None = None,
) -> GangPlacement:
    placement = GangPlacement(
        kube=cluster.kube, events=events or Events(), now=lambda: NOW, topology=mode
    )
    placement.enabled = True
    placement.pod_groups = PODGROUPS_V1BETA1 if v1beta1 else PODGROUPS
    placement.workload_preemption = True
    return placement


HAND_OFF_CASES = [
    # (name, mode, v1beta1 served, expected key on the group, pods unpinned)
    ("NodeSelector: no constraint, pinned", "NodeSelector", True, None, False),
    ("NodeSelectorAndConstraint: key, pinned", "NodeSelectorAndConstraint", True, RACK, False),
    ("Constraint: key, unpinned", "Constraint", True, RACK, True),
    ("Constraint on v1alpha2: no field there, pinned", "Constraint", False, None, False),
]


@pytest.mark.parametrize(
    ("mode", "v1beta1", "want_key", "unpinned"),
    [pytest.param(*case[1:], id=case[0]) for case in HAND_OFF_CASES],
)
async def test_pod_group_carries_the_topology_constraint_as_configured(
    cluster: FakeCluster, mode: TopologyHandOff, v1beta1: bool, want_key: str | None,
    unpinned: bool,
) -> None:
    placement = _placement(cluster, mode, v1beta1=v1beta1)
    wl = _tas_workload([{"required": RACK}])
    pods = _with_group(gated_pods(job("train", count=2), 2), "job-train")
    assert (await placement.prepare(wl, pods, 2)).ready
    [pg] = cluster.server.objects(placement.pod_groups)
    got = ((pg["spec"].get("schedulingConstraints") or {}).get("topology") or [{}])[0].get("key")
    assert got == want_key
    assert placement.unpinned(wl) is unpinned
    # A workload that may spread is never unpinned, whatever the mode.
    assert not placement.unpinned(_tas_workload([{"preferred": RACK}]))


@pytest.mark.parametrize("answer", ["refuse", "drop"])
async def test_gate_off_groups_go_without_the_constraint_and_pods_stay_pinned(
    cluster: FakeCluster, answer: str
) -> None:
    """Without ``TopologyAwareWorkloadScheduling`` the API server refuses the field (its
    declarative validation: forbidden) or drops it: learnt once, the group is created without
    it, and the pods keep their domain's node selector."""

    def admit(body: Obj) -> Obj:
        if "schedulingConstraints" in body["spec"]:
            if answer == "refuse":
                raise Refused(
                    422,
                    "Invalid",
                    f'PodGroup.scheduling.k8s.io "{body["metadata"]["name"]}" is invalid: '
                    "spec.schedulingConstraints: Forbidden: disabled by feature-gate",
                )
            del body["spec"]["schedulingConstraints"]
        return body

    cluster.server.admission[PODGROUPS_V1BETA1.plural] = admit
    placement = _placement(cluster, "Constraint")
    wl = _tas_workload([{"required": RACK}])
    pods = _with_group(gated_pods(job("train", count=2), 2), "job-train")
    assert (await placement.prepare(wl, pods, 2)).ready
    assert placement.topology_constraints is False
    assert not placement.unpinned(wl)
    [pg] = cluster.server.objects(PODGROUPS_V1BETA1)
    assert "schedulingConstraints" not in pg["spec"]
    posts = len(cluster.server.requests_to("POST", PODGROUPS_V1BETA1))
    assert posts == (2 if answer == "refuse" else 1)
    # Learnt: the next group is created in one request, without the field.
    other = _with_group(gated_pods(job("train", count=2), 2), "job-other")
    assert (await placement.prepare(wl, other, 2)).ready
    assert len(cluster.server.requests_to("POST", PODGROUPS_V1BETA1)) == posts + 1


def _bound(pods: list[Obj], hosts: list[str | None]) -> list[Obj]:
    for pod, host in zip(pods, hosts, strict=True):
        pod["spec"]["schedulingGates"] = []
        if host is not None:
            pod["spec"]["nodeName"] = host
    return pods


FOLLOW_CASES = [
    # (name, mode, hosts the 2 pods are bound on, expected hosts written or None: unchanged)
    ("Constraint, bound elsewhere: the assignment follows", "Constraint", ["h1", "h2"],
     [(["h1"], 1), (["h2"], 1)]),
    ("Constraint, both on one host", "Constraint", ["h1", "h1"], [(["h1"], 2)]),
    ("Constraint, bound where assigned: nothing written", "Constraint", ["n0a", "n0b"], None),
    ("Constraint, one pod not bound yet: nothing written", "Constraint", ["h1", None], None),
    ("NodeSelectorAndConstraint: pinned, never rewritten", "NodeSelectorAndConstraint",
     ["h1", "h2"], None),
]


@pytest.mark.parametrize(
    ("mode", "hosts", "want"), [pytest.param(*case[1:], id=case[0]) for case in FOLLOW_CASES]
)
async def test_assignment_follows_where_kube_scheduler_bound_the_gang(
    cluster: FakeCluster, mode: TopologyHandOff, hosts: list[str | None],
    want: list[tuple[list[str], int]] | None,
) -> None:
    events = Events()
    placement = _placement(cluster, mode, events=events)
    placement.topology_constraints = True
    wl = _tas_workload([{"required": RACK}])
    stored = cluster.server.add(WORKLOADS, wl.to_dict())
    wl.metadata.resource_version = stored["metadata"]["resourceVersion"]
    pods = _bound(gated_pods(job("train", count=2), 2), hosts)
    await placement.follow_binding(wl, {wl.spec.pod_sets[0].name: pods})
    written = Workload.model_validate(cluster.server.get(WORKLOADS, wl.name, wl.namespace))
    assert written.status.admission is not None
    ta = written.status.admission.pod_set_assignments[0].topology_assignment
    assert ta is not None
    if want is None:
        assert ta.domains() == [(["n0a"], 1), (["n0b"], 1)]
        assert not events.recorded
    else:
        assert ta.domains() == want
        assert events.reasons(wl.name) == ["TopologyAssignmentFollowed"]


PINNED_CASES = [
    # (name, topology request, assignment levels (None: hosts)): Constraint keeps them pinned
    ("slices: kube-scheduler knows nothing of them",
     {"required": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 1}, None),
    ("a Topology without the hostname level: the assignment cannot follow",
     {"required": RACK}, ["cloud.example.com/block", RACK]),
]


@pytest.mark.parametrize(
    ("request_", "levels"), [pytest.param(*case[1:], id=case[0]) for case in PINNED_CASES]
)
def test_constraint_mode_keeps_pinned_what_cannot_follow_the_binding(
    cluster: FakeCluster, request_: Obj, levels: list[str] | None
) -> None:
    placement = _placement(cluster, "Constraint")
    placement.topology_constraints = True
    wl = _tas_workload([request_], levels=levels)
    assert placement.constraint(wl) == RACK  # the group still gets the constraint
    assert not placement.unpinned(wl)
    assert placement.unpinned(_tas_workload([{"required": RACK}]))
