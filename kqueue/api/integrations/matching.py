"""Whether a waiting Workload still matches its object: Kueue's ``EquivalentToWorkload``
(pkg/util/equality), reduced to what admission reads.

A user may change a queued object (a suspended Job's resources, another kind's replicas) before it
is admitted; its Workload must then ask for what the object will run, or quota is charged for
pods that are not the ones that start. Kueue compares the pod sets' names, counts, minCount,
containers, init containers and tolerations, and updates a suspended job's Workload in place
while it holds no quota (``updateWorkloadToMatchJob``).

kqueue compares what its admission reads of a pod set: names, counts, minCount and each pod's
requests (the resources quota is charged for: containers, sidecars, init containers, overhead).
It deliberately leaves out the node selector and tolerations: while an evicted object waits
for its controller to reset it, its templates still carry the last admission's node labels
and tolerations, which kqueue then puts back as the Workload recorded them
(``hold_patch``); taking them into the Workload would pin the next admission to the old flavor.
It also leaves out images, commands and the rest of a container: they change nothing kqueue
decides.
"""

from __future__ import annotations

from collections.abc import Sequence

from kqueue.api.quantity import format_quantity
from kqueue.api.v1alpha1.workload import PodSet

__all__ = ["pod_set_changes"]


def _requests(requests: dict[str, int]) -> str:
    if not requests:
        return "nothing"
    return ", ".join(f"{res} {format_quantity(n, res)}" for res, n in sorted(requests.items()))


def pod_set_changes(want: Sequence[PodSet], have: Sequence[PodSet]) -> list[str]:
    """How the object's pod sets (``want``) differ from its Workload's (``have``), one phrase
    per difference, for the event that says why the Workload was updated; empty if they
    match."""
    names_want, names_have = [p.name for p in want], [p.name for p in have]
    if names_want != names_have:
        return [f"pod sets {', '.join(names_have)} are now {', '.join(names_want)}"]
    changes: list[str] = []
    for w, h in zip(want, have, strict=True):
        if w.count != h.count:
            changes.append(f"pod set {w.name}: {h.count} pods are now {w.count}")
        if w.min_count != h.min_count:
            changes.append(f"pod set {w.name}: minCount {h.min_count} is now {w.min_count}")
        rw, rh = w.pod_requests(), h.pod_requests()
        if rw != rh:
            changes.append(
                f"pod set {w.name}: a pod's requests {_requests(rh)} are now {_requests(rw)}"
            )
    return changes
