"""The topology hand-off: what a PodGroup tells kube-scheduler about kqueue's TAS domain.

Kubernetes 1.37's ``scheduling.k8s.io/v1beta1`` PodGroup has ``schedulingConstraints.topology``
(gate ``TopologyAwareWorkloadScheduling``, alpha; immutable): a node label *key*, and
kube-scheduler places all the group's pods in one domain of that level, a domain it picks.
kqueue's TAS picks the domain itself when it admits (it accounts that domain's capacity), so
the two can disagree. ``topologyHandOff`` in the configuration says how they are combined:

* ``NodeSelector``: no constraint; each released pod carries its assigned domain's node
  selector (the hostname with a hostname level), as without the API. kube-scheduler binds
  the gang all or nothing on the nodes kqueue chose.
* ``NodeSelectorAndConstraint``: the same selectors, and the group's constraint key is the
  pod set's required level. Both agree by construction (the pinned nodes lie in one domain of
  that level); kube-scheduler's topology plugin then also checks it.
* ``Constraint``: the constraint only; the pods keep the flavor's node labels but not the
  domain's, and kube-scheduler picks the domain. The pods carry ``kqueue.io/tas`` and count
  through the assignment, so once kube-scheduler has bound them all kqueue rewrites the
  assignment to the hosts they are bound to (:func:`bound_domains`; Topologies ending with the
  hostname level): its books then name the domain the gang really runs in. Between admission
  and binding they name the domain kqueue chose; without the hostname level they keep it. The
  follow goes through the engine (:class:`Books`, ``Engine.follow_binding``): gangs booked,
  but not bound, on the hosts it lands on are re-booked in free room
  (kqueue/engine/tas/follow.py), so no host is counted twice.

``Constraint`` unpins only workloads whose assignments can follow the binding
(:func:`followable`: no pod set slices, a Topology ending with the hostname level); the others
get the constraint and stay pinned.

The constraint is set only where it says what the admission says: every admitted pod set of
the workload (its one PodGroup) has a ``required`` level, the same one, and either there is
one such pod set or all are of one ``podSetGroupName`` (placed in one domain together).
``preferred`` and ``unconstrained`` requests may spread over domains, so get none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kqueue.api.v1alpha1 import TopologyAssignment, Workload, encode_assignment
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import PodSetName, WorkloadKey

Obj = dict[str, Any]

TopologyHandOff = Literal["NodeSelector", "NodeSelectorAndConstraint", "Constraint"]
CONSTRAINTS_FIELD = "spec.schedulingConstraints"
HOSTNAME = "kubernetes.io/hostname"


def constraint_key(wl: Workload) -> str | None:
    """The level kube-scheduler may be told to keep the workload's gang in, or None."""
    adm = wl.status.admission
    if adm is None or not adm.pod_set_assignments:
        return None
    levels: set[str] = set()
    groups: set[str | None] = set()
    for psa in adm.pod_set_assignments:
        pod_set = wl.pod_set(psa.name)
        if pod_set is None:
            return None
        if (pod_set.template.metadata.annotations or {}).get(
            c.GANG_SCHEDULING_ANNOTATION
        ) == "false":
            continue  # its pods name no group
        request = pod_set.topology_request
        if psa.topology_assignment is None or request is None or not request.required:
            return None
        levels.add(request.required)
        groups.add(request.pod_set_group_name)
    if len(levels) != 1:
        return None
    if len(adm.pod_set_assignments) > 1 and (len(groups) != 1 or None in groups):
        return None
    return levels.pop()


def followable(wl: Workload) -> bool:
    """Whether ``wl``'s pods may go without their domain's node selector (``Constraint``): the
    constraint says all of the request (no slices: kube-scheduler knows nothing of them), and
    every assignment names hosts, so it can follow where kube-scheduler binds the pods
    (:func:`bound_domains`). Otherwise they stay pinned, and kqueue's books stay true."""
    adm = wl.status.admission
    if adm is None or constraint_key(wl) is None:
        return False
    for psa in adm.pod_set_assignments:
        pod_set = wl.pod_set(psa.name)
        request = pod_set.topology_request if pod_set is not None else None
        if request is None or psa.topology_assignment is None:
            continue  # kept out of the gang (checked by constraint_key)
        if (
            request.pod_set_slice_required_topology
            or request.podset_slice_required_topology_constraints
            or list(psa.topology_assignment.levels) != [HOSTNAME]
        ):
            return False
    return True


def scheduling_constraints(key: str) -> Obj:
    return {"topology": [{"key": key}]}


def stored_key(group: Obj) -> str | None:
    """The constraint key a PodGroup as stored carries (None: none)."""
    topology = (((group.get("spec") or {}).get("schedulingConstraints") or {}).get("topology")
                or [])
    return str(topology[0].get("key")) if topology and topology[0].get("key") else None


def refuses_constraints(exc: KubeError) -> bool:
    """The API server's answer when ``TopologyAwareWorkloadScheduling`` is off: invalid,
    naming the field."""
    return exc.status == 422 and CONSTRAINTS_FIELD in exc.message


def bound_domains(
    ta: TopologyAssignment, count: int, pods: Sequence[Obj]
) -> list[tuple[list[str], int]] | None:
    """Per host, the pods of a pod set bound there, when that differs from ``ta`` and all
    ``count`` of them are bound; None otherwise (not all bound yet, already the same, or an
    assignment that does not name hosts)."""
    if list(ta.levels) != [HOSTNAME]:
        return None
    hosts = Counter(
        str(node)
        for p in pods
        if (node := (p.get("spec") or {}).get("nodeName"))
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    )
    if sum(hosts.values()) != count:
        return None
    bound = sorted(([host], n) for host, n in hosts.items())
    return None if bound == sorted(ta.domains()) else bound


def booked_where_bound(wl: Workload, pods: Sequence[Obj]) -> bool:
    """Whether every pod ``wl``'s topology assignments place is bound, on the hosts they name:
    its booking is then a fact. Otherwise (pods not all bound, or bound elsewhere and not
    followed yet) it is kqueue's guess, which a followed binding may move."""
    adm = wl.status.admission
    booked: Counter[str] = Counter()
    for psa in adm.pod_set_assignments if adm else ():
        if psa.topology_assignment is not None:
            for values, n in psa.topology_assignment.domains():
                booked[values[-1]] += n
    bound = Counter(
        str(node)
        for p in pods
        if (node := (p.get("spec") or {}).get("nodeName"))
        and c.TAS_LABEL in ((p.get("metadata") or {}).get("labels") or {})
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    )
    return bound == booked


@dataclass(frozen=True)
class Books:
    """The engine's books as a followed binding goes through them: ``workload`` reads a
    Workload as last seen, ``movable`` says whether its booking is only kqueue's guess (pods
    not pinned, and not all bound where it names), so the engine may re-book it."""

    engine: Engine
    workload: Callable[[str], Workload | None]
    movable: Callable[[Workload], bool]

    def follow(self, followed: Workload) -> list[Workload]:
        """Hand ``followed`` (its assignments rewritten to the binding) to the engine; the
        Workloads it re-booked, with their new assignments, to write."""
        adm = followed.status.admission
        assert adm is not None
        bound = {
            PodSetName(psa.name): ta
            for psa in adm.pod_set_assignments
            if (ta := from_api.topology_assignment(psa.topology_assignment)) is not None
        }

        def movable(key: WorkloadKey) -> bool:
            other = self.workload(key)
            return other is not None and self.movable(other)

        got = self.engine.follow_binding(WorkloadKey(followed.key), bound, movable)
        out: list[Workload] = []
        for key in sorted(got):
            other = self.workload(key) if key != followed.key else None
            if other is None or other.status.admission is None:
                continue
            rebooked = other.model_copy(deep=True)
            assert rebooked.status.admission is not None
            for psa in rebooked.status.admission.pod_set_assignments:
                ta = got[key].get(PodSetName(psa.name))
                if ta is not None:
                    psa.topology_assignment = encode_assignment(
                        list(ta.levels), [(list(v), n) for v, n in ta.domains]
                    )
            out.append(rebooked)
        return out
