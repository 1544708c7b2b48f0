"""Delayed topology requests: Kueue v0.19's topology placement after a ProvisioningRequest.

A topology-aware pod set whose flavor has a ProvisioningRequest check cannot be placed at quota
reservation on a cluster that scales up for it: its nodes do not exist yet. As Kueue
(``tas_flavorassigner.go``, ``podSetTopologyRequest``), the first pass reserves quota only and
marks the pod set ``delayedTopologyRequest: Pending`` (``fit.delayed_pod_sets``); once every
check is Ready, a second pass (:func:`second_pass`, Kueue's scheduler second pass for
``workload.NeedsSecondPass``) places it on the nodes that exist then, without fitting the quota
again (the reservation already holds it), and marks it ``Ready``. Only then is the workload
Admitted; until then its Admitted condition says ``PendingDelayedTopologyRequests``. When the
second pass finds no room, the workload keeps its reservation and the pass is tried again after
a backoff (Kueue's ``secondPassQueue``: 1 s doubling up to 30 s, a ``SecondPassFailed`` warning
event each time, :func:`retry_delay`).

A check applies when the ClusterQueue lists it for the pod set's flavor (``onFlavors``, or every
flavor); a check that does not provision nodes (a custom one) leaves the placement to the first
pass, as in Kueue.

The same rule covers a ClusterQueue with a MultiKueue check (``fit.delegates_placement``,
Kueue's ``HasMultiKueueAdmissionCheck`` in ``podSetTopologyRequest``): its topology-aware pod
sets reserve quota Pending, and the manager never places them, because the worker that runs the
workload does (the copy it gets carries the pod set's topology request). Once the check is Ready
(a worker admitted it) the second pass marks them Ready without a placement and the workload is
admitted. Kueue marks them Ready when the worker's copy shows a placement, in the same patch
that sets the check Ready; kqueue takes the Ready check for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Final

from ..types import Admission, FlavorName, PodSet, PodSetAssignment, PodSetName, Toleration
from ..workload import AdmittedWorkload
from .fit import place_pod_sets, requests_topology
from .placement import PlacementRequest
from .topology import TopologySnapshot

# Kueue's DelayedTopologyRequestState values.
DELAYED_PENDING: Final = "Pending"
DELAYED_READY: Final = "Ready"
# Kueue's WorkloadAdmittedReasonPendingDelayedTopologyRequests: the Admitted condition's reason
# while every check is Ready and a delayed placement is still to be made.
PENDING_DELAYED_REASON: Final = "PendingDelayedTopologyRequests"
PENDING_DELAYED_MESSAGE: Final = "There are pending delayed topology requests"
# Kueue's warning event when a second pass does not fit, and its retry backoff.
SECOND_PASS_FAILED: Final = "SecondPassFailed"
_RETRY_FIRST: Final = timedelta(seconds=1)
_RETRY_MAX: Final = timedelta(seconds=30)


def retry_delay(iteration: int) -> timedelta:
    """How long to wait before the ``iteration``-th retry of a failed second pass (1, 2, 4 ...
    seconds, at most 30; Kueue's ``secondPassQueue.nextDelay``)."""
    if iteration <= 0:
        return timedelta(0)
    delay: timedelta = _RETRY_FIRST * (1 << min(iteration - 1, 16))
    return min(delay, _RETRY_MAX)


@dataclass(frozen=True, slots=True)
class PodSetUpdate:
    """What a Ready admission check asks of a pod set's pods (its ``podSetUpdates`` entry): a
    ProvisioningRequest's nodeSelector and tolerations say which nodes were provisioned for it,
    so the second pass considers only those (Kueue merges them into the pod set before placing,
    tas_flavor_snapshot.go ``FindTopologyAssignmentsForFlavor``)."""

    name: PodSetName
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


def with_updates(ps: PodSet, updates: Sequence[PodSetUpdate]) -> PodSet | str:
    """``ps`` with ``updates`` merged (Kueue's podset ``Merge``: nodeSelector entries added, a
    key given two values refused, tolerations added once); or why they conflict."""
    selector = dict(ps.node_selector)
    tolerations = list(ps.tolerations)
    for update in updates:
        if update.name != ps.name:
            continue
        for key, value in update.node_selector.items():
            if selector.get(key, value) != value:
                return (
                    f"invalid podSetUpdate for PodSet {ps.name}, error: invalid admission "
                    f"check PodSetUpdate: conflict for nodeSelector: conflict for key={key}, "
                    f"value1={selector[key]}, value2={value}"
                )
            selector[key] = value
        tolerations += [t for t in update.tolerations if t not in tolerations]
    return replace(ps, node_selector=selector, tolerations=tuple(tolerations))


def is_pending(psa: PodSetAssignment) -> bool:
    return psa.topology is None and psa.delayed_topology == DELAYED_PENDING


def has_pending(admission: Admission | None) -> bool:
    """Some pod set still waits for its placement (Kueue's HasTopologyAssignmentsPending)."""
    return admission is not None and any(is_pending(psa) for psa in admission.pod_sets)


def second_pass(
    aw: AdmittedWorkload,
    topology: TopologySnapshot,
    *,
    delegated: bool = False,
    updates: Sequence[PodSetUpdate] = (),
) -> Admission | str:
    """The admission of ``aw`` with its pending pod sets placed on ``topology`` (which holds
    every other placement, this workload's first-pass ones included) and marked Ready; or why
    they do not fit. ``delegated`` (a MultiKueue ClusterQueue): marked Ready with no placement,
    the worker that runs the workload placed them. ``updates``: the Ready checks' podSetUpdates;
    a pod set is placed only on nodes that match them."""
    if delegated:
        return replace(aw.admission, pod_sets=tuple(
            replace(psa, delayed_topology=DELAYED_READY) if is_pending(psa) else psa
            for psa in aw.admission.pod_sets
        ))
    index = {ps.name: i for i, ps in enumerate(aw.info.pod_sets)}
    reqs: list[tuple[int, FlavorName, PlacementRequest]] = []
    for psa in aw.admission.pod_sets:
        if not is_pending(psa) or psa.count == 0:
            continue
        i = index.get(psa.name)
        flavors = sorted({f for f in psa.flavors.values() if topology.is_tas(f)})
        if i is None or not flavors:
            named = ", ".join(sorted(set(psa.flavors.values())))
            return (
                f"couldn't assign flavors to pod set {psa.name}: Flavor \"{named}\" information "
                "missing in TAS cache"
            )
        ps = with_updates(aw.info.pod_sets[i], updates)
        if isinstance(ps, str):
            return ps
        # The first pass delayed only pod sets placed by topology, asked for or implied.
        reqs.append((i, flavors[0], PlacementRequest(ps, psa.count, not requests_topology(ps))))
    placed, failure = place_pod_sets(reqs, topology)
    if failure is not None:
        return failure
    pod_sets = tuple(
        replace(psa, topology=placed.get(psa.name), delayed_topology=DELAYED_READY)
        if is_pending(psa)
        else psa
        for psa in aw.admission.pod_sets
    )
    return replace(aw.admission, pod_sets=pod_sets)
