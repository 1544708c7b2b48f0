"""Each pod of a managed LeaderWorkerSet joins its group's pod group.

The webhook gives the leader and worker templates everything a pod group needs but its name: a
template is shared by every group, and a leader learns its group index only from the
LeaderWorkerSet controller's pod webhook, after kqueue's pod webhooks ran. So once a gated pod
carries ``leaderworkerset.sigs.k8s.io/name`` and ``.../group-index``, kqueue labels it
``kqueue.io/pod-group-name: <lws>-<index>`` (a gated pod's labels may change), as Kueue's
LeaderWorkerSet reconciler labels the pods with their group's Workload. From then on the pod
integration drives the group: one gang Workload per group, released together, stopped together.
"""

from __future__ import annotations

import logging
from typing import Any

from kqueue.api.integrations.leaderworkerset import group_label_for, is_lws_pod
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import is_gated
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, NotFound
from kqueue.controller.resources import PODS
from kqueue.controller.workqueue import Requeue, WorkQueue, run_workers

logger = logging.getLogger(__name__)

Obj = dict[str, Any]


def wanted_group(pod: Obj) -> str | None:
    """The group label the pod still needs, or None (not an LWS pod kqueue holds, not indexed
    yet, or labelled already)."""
    if not is_lws_pod(pod) or not is_gated(pod):
        return None
    want = group_label_for(pod)
    have = ((pod.get("metadata") or {}).get("labels") or {}).get(c.POD_GROUP_NAME_LABEL)
    return want if want is not None and have != want else None


class GroupLabeller:
    def __init__(self, *, pods: Store[Obj], kube: Kube) -> None:
        self._pods = pods
        self._kube = kube
        self.queue: WorkQueue[str] = WorkQueue("jobs/leaderworkerset")

    def on_pod(self, key: str, pod: Obj, *rest: Obj) -> None:
        if wanted_group(rest[-1] if rest else pod) is not None:
            self.queue.add(key)

    async def run(self) -> None:
        for key in self._pods:
            pod = self._pods.get(key)
            if pod is not None and wanted_group(pod) is not None:
                self.queue.add(key)
        await run_workers(self.queue, self, workers=2)

    async def __call__(self, key: str, /) -> Requeue | None:
        pod = self._pods.get(key)
        if pod is None:
            return None
        group = wanted_group(pod)
        if group is None:
            return None
        meta = pod.get("metadata") or {}
        try:
            await self._kube.patch(
                PODS,
                str(meta.get("name")),
                {
                    "metadata": {
                        "resourceVersion": meta.get("resourceVersion"),
                        "labels": {c.POD_GROUP_NAME_LABEL: group},
                    }
                },
                namespace=meta.get("namespace"),
            )
        except NotFound:
            return None
        except Conflict:
            return Requeue(after=0.2)  # changed meanwhile: look again
        logger.info("pod %s joins pod group %s (LeaderWorkerSet group)", key, group)
        return None
