"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): one gang Workload per group (a leader and its
workers), as Kueue's LeaderWorkerSet integration.

A LeaderWorkerSet of ``replicas`` groups of ``size`` pods runs each group as a leader pod (of the
leader StatefulSet) and ``size - 1`` worker pods (of the group's worker StatefulSet). Kueue makes
one Workload per group so that each group is admitted whole and a rolling update or a scale-up
admits group by group. kqueue does it with its pod groups: the LeaderWorkerSet's webhook puts the
queue, priority and maximum-execution-time labels, the gate, the parent marker ``kqueue.io/suspended-by-parent:
leaderworkerset`` and ``kqueue.io/pod-group-total-count: <size>`` in the leader and worker
templates; once the LeaderWorkerSet controller has labelled a pod with its group index, kqueue
labels it ``kqueue.io/pod-group-name: <group>`` (:func:`group_name_for`), and the group's pods
become one gang Workload (:func:`kqueue.api.integrations.pod.workload_for_pod_group`).

:func:`leaderworkerset_pods` gives the pods a LeaderWorkerSet would have, for ``kqueue simulate``
and ``kqueue explain``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from kqueue.api.integrations.common import IntegrationError, labels_of
from kqueue.api.integrations.declaration import Integration, KueueKeys, Ranks, Workloads
from kqueue.api.integrations.deployment import PROPAGATED_LABELS
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c

LWS_GROUP: Final = "leaderworkerset.x-k8s.io"
LWS_API_VERSION: Final = f"{LWS_GROUP}/v1"
LWS_KIND: Final = "LeaderWorkerSet"
LWS_PARENT: Final = "leaderworkerset"
"""Value of ``kqueue.io/suspended-by-parent`` on the pod templates of a managed LeaderWorkerSet."""
# Labels the LeaderWorkerSet controller (and its pod webhook) put on every pod of a group.
LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/worker-index"
# The labels a LeaderWorkerSet's pods carry from it: a Deployment's, and the maximum execution
# time, which Kueue reads from the LeaderWorkerSet for each group's Workload
# (leaderworkerset_reconciler.go constructWorkload: podcontroller.NewGroupWorkload on the
# LeaderWorkerSet); kqueue builds that Workload from the group's pods, so it copies the label.
LWS_PROPAGATED_LABELS: Final = (*PROPAGATED_LABELS, c.MAX_EXEC_TIME_SECONDS_LABEL)


def _int(value: Any, path: str, default: int, minimum: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise IntegrationError(path, f"must be an integer >= {minimum}, got {value!r}")
    return value


def replicas(lws: Mapping[str, Any]) -> int:
    """``spec.replicas``: the number of groups (default 1)."""
    return _int((lws.get("spec") or {}).get("replicas"), "spec.replicas", 1, 0)


def size(lws: Mapping[str, Any]) -> int:
    """``spec.leaderWorkerTemplate.size``: pods per group, the leader included (default 1)."""
    template = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    return _int(template.get("size"), "spec.leaderWorkerTemplate.size", 1, 1)


def group_name_for(lws_name: str, group_index: str | int) -> str:
    """The pod group (and Workload) name of one group of a LeaderWorkerSet."""
    return f"{lws_name}-{group_index}"


def template_metadata(lws: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) the managed LeaderWorkerSet's pod templates must carry: its queue,
    priority, preemptibility and maximum-execution-time labels, the parent marker and the
    group's size."""
    labels = {k: v for k, v in labels_of(lws).items() if k in LWS_PROPAGATED_LABELS}
    annotations = {
        c.SUSPENDED_BY_PARENT_ANNOTATION: LWS_PARENT,
        c.POD_GROUP_TOTAL_COUNT_ANNOTATION: str(size(lws)),
    }
    return labels, annotations


def is_lws_pod(pod: Mapping[str, Any]) -> bool:
    """A pod of a LeaderWorkerSet kqueue manages: controlled by a StatefulSet, its template
    marked by kqueue's LeaderWorkerSet webhook."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(c.SUSPENDED_BY_PARENT_ANNOTATION) != LWS_PARENT:
        return False
    return any(
        r.get("controller") and r.get("kind") == "StatefulSet" and r.get("apiVersion") == "apps/v1"
        for r in meta.get("ownerReferences") or []
    )


def group_label_for(pod: Mapping[str, Any]) -> str | None:
    """The ``kqueue.io/pod-group-name`` a LeaderWorkerSet pod must get, once the LeaderWorkerSet
    controller labelled it with its set and group index; None before that."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    name, index = labels.get(LWS_NAME_LABEL), labels.get(GROUP_INDEX_LABEL)
    if not name or index is None or index == "":
        return None
    return group_name_for(str(name), str(index))


def leaderworkerset_pods(lws: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods the LeaderWorkerSet runs: per group ``<lws>-<g>`` (the leader, from the leader
    template, else the worker template) and ``<lws>-<g>-<w>`` (the workers), labelled and
    annotated as the webhook and kqueue label them, owned by StatefulSets as the controller's."""
    if lws.get("kind") != LWS_KIND:
        raise IntegrationError("kind", f"expected a LeaderWorkerSet, got {lws.get('kind')!r}")
    meta = lws.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    worker = lwt.get("workerTemplate")
    if not isinstance(worker, Mapping) or not isinstance(worker.get("spec"), Mapping):
        raise IntegrationError("spec.leaderWorkerTemplate.workerTemplate.spec", "required")
    leader = lwt.get("leaderTemplate") or worker
    if not isinstance(leader.get("spec"), Mapping):
        raise IntegrationError("spec.leaderWorkerTemplate.leaderTemplate.spec", "required")
    labels, annotations = template_metadata(lws)
    pods: list[dict[str, Any]] = []
    for g in range(replicas(lws)):
        group = group_name_for(name, g)
        for w in range(size(lws)):
            template = leader if w == 0 else worker
            tmeta = template.get("metadata") or {}
            pod_labels = {
                **(tmeta.get("labels") or {}),
                **labels,
                LWS_NAME_LABEL: name,
                GROUP_INDEX_LABEL: str(g),
                WORKER_INDEX_LABEL: str(w),
                c.POD_GROUP_NAME_LABEL: group,
            }
            sts = name if w == 0 else group
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{g}" if w == 0 else f"{name}-{g}-{w}",
                        "namespace": namespace,
                        "labels": pod_labels,
                        "annotations": {**(tmeta.get("annotations") or {}), **annotations},
                        "ownerReferences": [
                            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts,
                             "uid": f"{sts}-uid", "controller": True}
                        ],
                    },
                    "spec": copy.deepcopy(dict(template["spec"])),
                }
            )
    return pods


def ranks(_: Mapping[str, Any], wl: Workload) -> dict[str, Ranks]:
    """A group's pods are ranked by their worker index, the leader's 0. With a leader
    template the group has two pod sets, the leader's (one pod) and the workers' (indexes from
    1): as Kueue's ungater does for a pod-set group, the smaller pod set starts at 0 and the
    larger one after it."""
    sets = sorted(wl.spec.pod_sets, key=lambda ps: ps.count)
    if len(sets) == 2:
        return {
            sets[0].name: Ranks(WORKER_INDEX_LABEL),
            sets[1].name: Ranks(WORKER_INDEX_LABEL, offset=sets[0].count),
        }
    return {ps.name: Ranks(WORKER_INDEX_LABEL) for ps in sets}


INTEGRATION: Final = Integration(
    framework="leaderworkerset.x-k8s.io/leaderworkerset",
    api_version=LWS_API_VERSION,
    kind=LWS_KIND,
    workloads=Workloads.EACH_POD_GROUP,
    pods=leaderworkerset_pods,
    pod_of=is_lws_pod,
    needs=("pod",),
    operator="lws",
    queue_label_required=True,
    kueue_keys=KueueKeys.ON_CONVERT,
    ranks=ranks,
)
