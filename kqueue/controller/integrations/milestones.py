"""What every kind's reconciler reports at the same two points, plain pods and pod groups too:

* a Workload was created for an object: the ``CreatedWorkload`` event on the object and the
  creation latency (Kueue's ``workload_creation_latency_seconds``, by the object's kind);
* the last admitted pod left the gate: the ``Started`` event, once, counting every admitted pod
  (its controller may create them in batches).
"""

from __future__ import annotations

from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.controller.events import EventRecorder
from kqueue.controller.integrations.release import Released
from kqueue.controller.metrics import Metrics

Obj = dict[str, Any]


def workload_created(
    obj: Obj, kind: str, wl: Workload, created: Obj, *, events: EventRecorder, metrics: Metrics
) -> None:
    """``created`` (the API's answer) was made for ``obj``, an object of ``kind``."""
    metrics.workload_created(kind, obj, created)
    ns = wl.namespace or "default"
    events.record(obj, "Normal", "CreatedWorkload", f"Created Workload: {ns}/{wl.name}")


def started(obj: Obj, wl: Workload, result: Released, admitted: int, *, events: EventRecorder) -> None:
    """``Started`` once the release ``result`` let the last of ``admitted`` pods go."""
    if result.released and result.running < admitted <= result.running + result.released:
        cq = wl.status.admission.cluster_queue if wl.status.admission else "?"
        events.record(
            obj,
            "Normal",
            "Started",
            f"Admitted by clusterQueue {cq}; all {admitted} admitted pod(s) released",
        )


__all__ = ["started", "workload_created"]
