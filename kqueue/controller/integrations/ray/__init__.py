"""RayCluster, RayJob and RayService (frameworks ``ray.io/raycluster``, ``ray.io/rayjob`` and
``ray.io/rayservice``): one gang Workload per object, the pod set ``head`` and one per worker group
(plus ``submitter`` for a RayJob in K8sJobMode); suspended while queued (a RayService through
``spec.rayClusterConfig.suspend``), stopped and resumed whole. The RayCluster a RayJob or a
RayService creates is queued with its parent, never on its own. One package for the three: they
share the RayClusterSpec's pod sets, templates and webhooks (:mod:`.generic`, :mod:`.webhook`).
"""

from __future__ import annotations

from kqueue.api.integrations import ray as ray_api
from kqueue.controller.integrations.framework import (
    Framework,
    PolicyRule,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.ray import webhook
from kqueue.controller.integrations.ray.generic import (
    RayClusterIntegration,
    RayJobIntegration,
    RayServiceIntegration,
)
from kqueue.controller.integrations.ray.multikueue import RAYCLUSTER_ADAPTER, RAYJOB_ADAPTER
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.suspension import suspendable_hooks

RAYJOB_NAME = ray_api.RAYJOB.framework
RAYCLUSTER_NAME = ray_api.RAYCLUSTER.framework
RAYSERVICE_NAME = ray_api.RAYSERVICE.framework


def _rule(plural: str) -> dict[str, list[str]]:
    return {"apiGroups": ["ray.io"], "apiVersions": ["v1"], "resources": [plural]}


RAYJOB = register(
    Framework(
        declares=ray_api.RAYJOB,
        summary=(
            "one Workload per RayJob: pod sets `head`, one per worker group (replicas pods) "
            "and `submitter` (K8sJobMode); suspended while queued, stopped and resumed whole; "
            "its RayCluster is not queued"
        ),
        suspendable=True,
        job=RayJobIntegration,
        multikueue=RAYJOB_ADAPTER,
        webhooks=queue_label_webhooks(
            short="rayjob",
            rule=_rule("rayjobs"),
            mutate_path=webhook.RAYJOB_MUTATE_PATH,
            validate_path=webhook.RAYJOB_VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.RAYJOB, RAYJOB_NAME),
        ),
        rbac=suspendable_kind_rbac(
            "ray.io", "rayjobs", "RayJob", " (in its rayClusterSpec and submitter pod template)"
        ),
    )
)

RAYCLUSTER = register(
    Framework(
        declares=ray_api.RAYCLUSTER,
        summary=(
            "one Workload per RayCluster: pod sets `head` and one per worker group (replicas "
            "pods); suspended while queued, stopped and resumed whole; never finishes, its "
            "quota is freed when it is deleted"
        ),
        suspendable=True,
        job=RayClusterIntegration,
        multikueue=RAYCLUSTER_ADAPTER,
        webhooks=queue_label_webhooks(
            short="raycluster",
            rule=_rule("rayclusters"),
            mutate_path=webhook.RAYCLUSTER_MUTATE_PATH,
            validate_path=webhook.RAYCLUSTER_VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.RAYCLUSTER, RAYCLUSTER_NAME),
        ),
        rbac=suspendable_kind_rbac("ray.io", "rayclusters", "RayCluster"),
    )
)

RAYSERVICE = register(
    Framework(
        declares=ray_api.RAYSERVICE,
        summary=(
            "one Workload per RayService: pod sets `head` and one per worker group of its "
            "spec.rayClusterConfig; held through spec.rayClusterConfig.suspend, stopped and "
            "resumed whole; its RayCluster is not queued; never finishes, its quota is freed "
            "when it is deleted"
        ),
        suspendable=True,
        job=RayServiceIntegration,
        webhooks=queue_label_webhooks(
            short="rayservice",
            rule=_rule("rayservices"),
            mutate_path=webhook.RAYSERVICE_MUTATE_PATH,
            validate_path=webhook.RAYSERVICE_VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.RAYSERVICE, RAYSERVICE_NAME),
        ),
        rbac=(
            *suspendable_kind_rbac("ray.io", "rayservices", "RayService", " (in its rayClusterConfig)"),
            PolicyRule(
                ("ray.io",),
                ("rayclusters",),
                ("delete",),
                "the RayCluster KubeRay made for a RayService from its spec before an admission "
                "or eviction is deleted, so KubeRay makes it again from the new spec",
            ),
        ),
    )
)

__all__ = [
    "RAYCLUSTER",
    "RAYCLUSTER_NAME",
    "RAYJOB",
    "RAYJOB_NAME",
    "RAYSERVICE",
    "RAYSERVICE_NAME",
    "RayClusterIntegration",
    "RayJobIntegration",
    "RayServiceIntegration",
]
