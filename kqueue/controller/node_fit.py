"""The node-fit guard, the controller side: hold an admitted gang's pods until all of them fit.

The engine decides (``Engine.node_fit``, kqueue/engine/tas/node_fit.py); here:

1. the feed: kqueue's managed pods that are released and not bound yet go to the engine
   (``Engine.upsert_released_pod``), so a gang released a moment ago counts before
   kube-scheduler binds its pods; bound, they are in the bound-pod feed (``topology.py``);
2. ``admit``: before the job reconciler releases a workload's pods (and before it creates
   their PodGroup), it asks whether the pods still to be released fit. If not, the workload
   keeps its quota and its pods their ``kqueue.io/admission`` gate; its ``NodesFit`` condition
   (False, ``InsufficientNodeCapacity``) and a Warning event give the numbers, and it is
   remembered as held;
3. ``wake``: a node added or changed, a bound pod gone, a released pod gone: every held
   workload's object is reconciled again at once (no polling), and released if it fits now.

With waitForPodsReady, the timeout counts from admission, as Kueue's: a workload held longer
than the timeout is evicted and requeued like one whose pods kube-scheduler could not place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from kqueue.api.v1alpha1 import Workload, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.resources import WORKLOADS
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import PodSetName, WorkloadKey

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

HELD_EVENT = "NodesDoNotFit"
FITS_EVENT = "NodesFit"


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


class NodeFitHold:
    """Held workloads and the released-pod feed."""

    def __init__(
        self, *, engine: Callable[[], Engine], kube: Kube, events: EventRecorder, now: Now
    ) -> None:
        self._engine = engine
        self._kube = kube
        self._events = events
        self._now = now
        # Held workloads: Workload key -> what reconciles its object again, and the guard's
        # generation it was checked at.
        self._held: dict[str, tuple[Callable[[], None], tuple[int, int, int]]] = {}

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self._held)

    # -- the feed ------------------------------------------------------------------------------

    def apply(self, engine: Engine, pod: Obj) -> bool:
        """Feed ``pod`` to ``engine``; whether it left the released pods without being bound
        (ended or deleted first), which frees the room it took."""
        released = from_api.released_pod(pod)
        if released is not None:
            engine.upsert_released_pod(released)
            return False
        gone = engine.delete_released_pod(pod_key(pod))
        return gone and not (pod.get("spec") or {}).get("nodeName")

    def on_pod(self, _: str, pod: Obj, *rest: Obj) -> None:
        if self.apply(self._engine(), rest[-1] if rest else pod):
            self.wake()

    def on_pod_delete(self, _: str, pod: Obj) -> None:
        if self._engine().delete_released_pod(pod_key(pod)):
            self.wake()

    def wake(self) -> None:
        """Reconcile again every held workload checked before what the guard reads last
        changed (each is held again if it still does not fit). Events that change nothing the
        guard reads (a node's heartbeat) wake none."""
        now = self._engine().node_fit_generation()
        stale = [k for k, (_, seen) in self._held.items() if seen != now]
        for key in stale:
            requeue, _ = self._held.pop(key)
            requeue()

    # -- before release ------------------------------------------------------------------------

    async def admit(
        self,
        wl: Workload,
        pending: Mapping[str, int],
        released: Sequence[Obj],
        requeue: Callable[[], None],
    ) -> bool:
        """Whether ``wl``'s ``pending`` pods (per pod set, admitted and not released yet) may be
        released now. ``released`` are the pods about to be released when they may (counted at
        once, before the informer shows them ungated); ``requeue`` reconciles the object again
        when capacity frees."""
        engine = self._engine()
        verdict = engine.node_fit(
            WorkloadKey(wl.key), {PodSetName(k): v for k, v in pending.items()}
        )
        held = wl.condition(c.NODES_FIT)
        if verdict is None or verdict.fits:
            self._held.pop(wl.key, None)
            if held is not None and held.status == "False":
                what = (
                    f"all {verdict.needed} pods fit on the nodes' free capacity; released"
                    if verdict is not None
                    else "released (the node-fit guard no longer applies)"
                )
                await self._write(wl, "True", c.NODES_FIT_FITS, what, "Normal", FITS_EVENT)
            for pod in released:
                rp = from_api.released_pod(pod, ungated=True)
                if rp is not None:
                    engine.upsert_released_pod(rp)
            return True
        self._held[wl.key] = (requeue, engine.node_fit_generation())
        message = (
            f"{verdict.message}. The workload keeps its quota; its pods are released all "
            f"together when the nodes have room for them (a node added, pods ended)"
        )
        logger.info("Workload %s held by the node-fit guard: %s", wl.key, verdict.message)
        await self._write(
            wl, "False", c.NODES_FIT_INSUFFICIENT, message, "Warning", HELD_EVENT
        )
        return False

    async def _write(
        self,
        wl: Workload,
        status: Literal["True", "False"],
        reason: str,
        message: str,
        kind: Literal["Normal", "Warning"],
        event: str,
    ) -> None:
        out = wl.model_copy(deep=True)
        if not set_condition(out.status.conditions, c.NODES_FIT, status, reason, message, self._now()):
            return
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except KubeError as exc:
            # A newer Workload: its event brings the object back, and the condition is written
            # then.
            logger.debug("writing %s on Workload %s: %s", c.NODES_FIT, wl.key, exc)
            return
        old = wl.condition(c.NODES_FIT)
        if old is None or old.status != status or old.message != message:
            self._events.record(wl.to_dict(), kind, event, message)
