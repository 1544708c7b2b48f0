"""apps/v1 Deployment: each of its pods is its own Workload (Kueue's Deployment integration).

A Deployment is a serving workload: it never finishes, and a rolling update replaces its pods
a few at a time. Queued as one gang it would need quota for the old and the new ReplicaSet at
once, and a rollout would wait for the whole Deployment; so, as in Kueue, kqueue queues each pod
on its own. The Deployment's webhook copies its queue and priority labels into the pod template
and marks the template ``kqueue.io/suspended-by-parent: deployment``; each pod the ReplicaSet
creates is then held and admitted as a single pod (:func:`workload_for_pod`).

:func:`deployment_pods` gives the pods a Deployment would have, for ``kqueue simulate`` and
``kqueue explain``, which turn them into Workloads exactly as the controller does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from kqueue.api.integrations.common import IntegrationError, labels_of
from kqueue.api.integrations.declaration import Integration, KueueKeys, MaxExecTime, Workloads
from kqueue.api.integrations.statefulset import APPS_API_VERSION
from kqueue.api.v1alpha1 import constants as c

DEPLOYMENT_KIND: Final = "Deployment"
REPLICA_SET_KIND: Final = "ReplicaSet"
DEPLOYMENT_PARENT: Final = "deployment"
"""Value of ``kqueue.io/suspended-by-parent`` on the pod template of a managed Deployment."""
# The top-level labels a Deployment's pods carry from it: the queue, the priorities and the
# preemptibility. The pod builder reads them there.
PROPAGATED_LABELS: Final = (
    c.QUEUE_NAME_LABEL,
    c.PRIORITY_CLASS_LABEL,
    c.PREEMPTION_PRIORITY_CLASS_LABEL,
    c.PREEMPTIBILITY_LABEL,
)


def deployment_replicas(deployment: Mapping[str, Any]) -> int:
    value = (deployment.get("spec") or {}).get("replicas", 1)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError("spec.replicas", f"must be a non-negative integer, got {value!r}")
    return value


def template_metadata(deployment: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) a managed Deployment's pod template must carry: the propagated
    labels (those the Deployment has; the template's own win nowhere: the Deployment's labels
    are the source) and the parent marker."""
    labels = {k: v for k, v in labels_of(deployment).items() if k in PROPAGATED_LABELS}
    return labels, {c.SUSPENDED_BY_PARENT_ANNOTATION: DEPLOYMENT_PARENT}


def deployment_pods(deployment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods the Deployment runs at its size: its template, with the propagated labels,
    named ``<deployment>-<n>`` (the real names carry the ReplicaSet's hash and a random
    suffix), owned by a ReplicaSet named after the Deployment."""
    if deployment.get("kind") != DEPLOYMENT_KIND:
        raise IntegrationError("kind", f"expected a Deployment, got {deployment.get('kind')!r}")
    meta = deployment.get("metadata") or {}
    template = (deployment.get("spec") or {}).get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise IntegrationError("spec.template.spec", "required")
    name = str(meta.get("name", ""))
    labels, annotations = template_metadata(deployment)
    t_meta = template.get("metadata") or {}
    pods: list[dict[str, Any]] = []
    for i in range(deployment_replicas(deployment)):
        pod_meta: dict[str, Any] = {
            "name": f"{name}-{i}",
            "namespace": str(meta.get("namespace") or "default"),
            "uid": f"{meta.get('uid') or name}-{i}",
            "labels": {**(t_meta.get("labels") or {}), **labels},
            "annotations": {**(t_meta.get("annotations") or {}), **annotations},
            "ownerReferences": [
                {
                    "apiVersion": APPS_API_VERSION,
                    "kind": REPLICA_SET_KIND,
                    "name": name,
                    "uid": str(meta.get("uid") or ""),
                    "controller": True,
                }
            ],
        }
        pods.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": copy.deepcopy(template["spec"])}
        )
    return pods


def is_deployment_pod(pod: Mapping[str, Any]) -> bool:
    """A pod of a Deployment kqueue manages: controlled by a ReplicaSet, its template marked
    by kqueue's Deployment webhook."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(c.SUSPENDED_BY_PARENT_ANNOTATION) != DEPLOYMENT_PARENT:
        return False
    return any(
        r.get("controller") and r.get("kind") == REPLICA_SET_KIND and r.get("apiVersion") == APPS_API_VERSION
        for r in meta.get("ownerReferences") or []
    )


INTEGRATION: Final = Integration(
    framework="deployment",
    api_version=APPS_API_VERSION,
    kind=DEPLOYMENT_KIND,
    workloads=Workloads.EACH_POD,
    pods=deployment_pods,
    pod_of=is_deployment_pod,
    needs=("pod",),
    queue_label_required=True,
    kueue_keys=KueueKeys.ON_CONVERT,
    # Kueue's Deployment webhook copies only the queue and priority labels into the pod
    # template (deployment_webhook.go Default), so the label on a Deployment bounds nothing.
    max_exec_time=MaxExecTime.IGNORED,
)
