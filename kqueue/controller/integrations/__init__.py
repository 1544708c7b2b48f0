"""Integrations: each managed kind in its own package, registered in :mod:`.registry`.

``job`` (batch/v1 Job), ``pod`` (plain Pods and pod groups), ``jobset``, ``mpijob``,
``trainjob``, ``statefulset``, ``deployment``, ``leaderworkerset``, ``ray`` (RayJob, RayCluster,
RayService), ``kubeflow`` (the training-operator v1 jobs), ``appwrapper`` and ``sparkapplication``
are imported here so that importing this
package registers every integration. See :mod:`.framework` for what an
integration supplies, :mod:`.reconciler` for the generic reconciler and :mod:`.release` for the
one pod-release path.
"""

from __future__ import annotations

from kqueue.controller.integrations import job, jobset, mpijob, pod, trainjob

# isort: split
# Registered after the kinds above (the order of the docs table and the chart's rules).
from kqueue.controller.gate import PodSetRelease
from kqueue.controller.integrations import deployment, leaderworkerset, ray, statefulset

# isort: split
from kqueue.controller.integrations import kubeflow

# isort: split
from kqueue.controller.integrations import appwrapper, sparkapplication
from kqueue.controller.integrations.framework import (
    ComposableJob,
    Composed,
    Framework,
    GenericJob,
    IntegrationContext,
    PolicyRule,
    Webhook,
    WebhookContext,
)
from kqueue.controller.integrations.registry import enabled, frameworks, get

__all__ = [
    "ComposableJob",
    "Composed",
    "Framework",
    "GenericJob",
    "IntegrationContext",
    "PodSetRelease",
    "PolicyRule",
    "Webhook",
    "WebhookContext",
    "appwrapper",
    "deployment",
    "enabled",
    "frameworks",
    "get",
    "job",
    "jobset",
    "kubeflow",
    "leaderworkerset",
    "mpijob",
    "pod",
    "ray",
    "sparkapplication",
    "statefulset",
    "trainjob",
]
