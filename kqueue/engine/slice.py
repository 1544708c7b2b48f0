"""WorkloadSlices (Kueue KEP-77): elastic workloads that grow by replacement and shrink in place.

* **Scale-up**: the controller creates a new Workload for the whole new size, annotated
  ``kqueue.io/workload-slice-replacement-for: ns/name`` with the admitted slice it replaces. While
  it is nominated, the old slice's quota counts as free (``simulate_removal``), so only the delta
  of the scale-up is charged, and each pod set may use only the flavors the old slice has for it
  (sticky flavors: when they lack room the new slice pends, with a message naming the flavor,
  rather than switching). When the new slice is admitted, the old one is finished with reason
  ``WorkloadSliceReplaced`` in the same step (a ``FinishSlice`` decision next to the ``Admit``);
  its running pods now belong to the new slice and are not disturbed. Where the kind carries
  it (``Workload.max_execution_spans_slices``: a StatefulSet, which Kueue resizes as one
  Workload), the new slice starts with the time the old one used, its accumulated time plus
  the whole seconds it was admitted, so its maximum execution time ends where the old slice's
  would have (execution.py); an elastic Job's slice starts its own clock, as in Kueue.
* **Scale-down**: the admitted workload's counts change in place (``Engine.scale_down``), its
  admission is recomputed at the smaller counts and the freed quota is available at once.

Kueue looks the old slice up only in the new slice's ClusterQueue; so does kqueue. A slice whose
old slice does not hold quota there is an ordinary workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from .execution import accumulated
from .snapshot import Snapshot
from .types import (
    PODS,
    Admission,
    ClusterQueueName,
    FlavorName,
    PodSet,
    PodSetAssignment,
    PodSetName,
    ResourceName,
    Workload,
    WorkloadKey,
)
from .workload import AdmittedWorkload, WorkloadInfo

# The Finished condition reason for a replaced slice (Kueue's WorkloadSliceReplaced).
WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"

StickyFlavors = tuple[Mapping[ResourceName, FlavorName], ...]


@dataclass(frozen=True, slots=True)
class FinishSlice:
    """Finish ``old`` (``Finished=True``, reason ``WorkloadSliceReplaced``): ``new``, admitted in
    the same cycle, replaces it. Its quota is already released in the engine."""

    old: WorkloadKey
    new: WorkloadKey
    cluster_queue: ClusterQueueName
    message: str
    reason: str = WORKLOAD_SLICE_REPLACED


def replaced_slice(
    info: WorkloadInfo, snapshot: Snapshot, cq: ClusterQueueName
) -> AdmittedWorkload | None:
    """The admitted slice ``info`` replaces, if it holds quota in ``cq``."""
    old = info.obj.replacement_for
    if old is None or old == info.key:
        return None
    return snapshot.workload(old, cq)


def carried_time(
    info: WorkloadInfo, old: AdmittedWorkload, now: datetime
) -> tuple[WorkloadInfo, int | None]:
    """``info``, admitted at ``now`` in place of ``old``, with the accumulated execution time it
    starts with, and that time for its status (None: its kind does not carry it, it starts its
    own clock). A slice replacing an admitted one has never run itself (it would have finished
    ``old``), so the carried time replaces its own rather than adding to it: an admission rolled
    back and decided again carries the same time, not twice."""
    if not info.obj.max_execution_spans_slices:
        return info, None
    past = accumulated(old.info.obj, old.admission.admitted_since, now)
    return replace(info, obj=replace(info.obj, past_execution_seconds=past)), past


def sticky_flavors(info: WorkloadInfo, old: AdmittedWorkload) -> StickyFlavors:
    """Per pod set of ``info`` (matched by name), the flavor per resource the old slice uses."""
    by_name = {ps.name: ps.flavors for ps in old.admission.pod_sets}
    return tuple(dict(by_name.get(ps.name, {})) for ps in info.pod_sets)


def finish_message(new: WorkloadInfo) -> str:
    """Kueue's message on the replaced slice's Finished condition."""
    uid = new.uid or "UNKNOWN"
    return (
        f"Removed to accommodate a workload (UID: {uid}, Key: {new.key}) due to workload "
        f"slice aggregation"
    )


def sticky_message(old: FlavorName, other: FlavorName) -> str:
    """Why a flavor other than the old slice's is not tried (Kueue's wording)."""
    return f"couldn't change flavor from: {old} to: {other}"


# -- scale-down -------------------------------------------------------------------------------


def scaled_down(
    wl: Workload, admission: Admission, counts: Mapping[PodSetName, int]
) -> tuple[Workload, Admission]:
    """``wl`` and its admission with the pod sets named in ``counts`` shrunk to those counts.

    Usage is recomputed exactly from the per-pod requests (pods count one each); a count larger
    than the admitted one is not a scale-down and is refused.
    """
    unknown = sorted(set(counts) - {ps.name for ps in wl.pod_sets})
    if unknown:
        raise ValueError(f"unknown pod set(s): {', '.join(unknown)}")
    per_pod = {ps.name: ps.requests for ps in wl.pod_sets}
    pod_sets = []
    for psa in admission.pod_sets:
        n = counts.get(psa.name, psa.count)
        if n > psa.count or n < 0:
            raise ValueError(
                f"pod set {psa.name}: {n} is not a scale-down of the admitted count {psa.count}"
            )
        usage: dict[ResourceName, int] = {}
        for res, amount in psa.resource_usage.items():
            if res == PODS:
                usage[res] = n
            elif res in per_pod.get(psa.name, {}):
                usage[res] = per_pod[psa.name][res] * n
            else:
                # Not in the spec any more: scale the admitted total (exact when it divides).
                usage[res] = amount * n // psa.count if psa.count else 0
        pod_sets.append(PodSetAssignment(psa.name, dict(psa.flavors), usage, n))
    new_admission = replace(admission, pod_sets=tuple(pod_sets))
    new_pod_sets = tuple(
        _with_count(ps, counts[ps.name]) if ps.name in counts else ps for ps in wl.pod_sets
    )
    return replace(wl, pod_sets=new_pod_sets, admission=new_admission), new_admission


def _with_count(ps: PodSet, n: int) -> PodSet:
    return replace(ps, count=n, min_count=None if ps.min_count is None else min(ps.min_count, n))
