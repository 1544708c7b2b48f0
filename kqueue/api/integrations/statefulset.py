"""apps/v1 StatefulSet -> Workload: one gang Workload for all of its replicas.

As Kueue's StatefulSet integration (which builds the Workload from the StatefulSet, not from its
pods: with the default ``podManagementPolicy: OrderedReady`` the StatefulSet creates pod ``n+1``
only once pod ``n`` is ready, so the Workload cannot wait for every pod to exist). One pod set
``main`` of ``spec.replicas`` pods (default 1) with the StatefulSet's pod template; owned by the
StatefulSet.

kqueue differs from Kueue in one way: a StatefulSet is always resizable. Its Workload is named
from the StatefulSet's generation, so a scale-up makes a new WorkloadSlice that replaces the
admitted one (``replacement_for``) and is charged only the difference, as an elastic Job's.
Unlike an elastic Job's, the new slice starts with the time the one it replaces used, so the
StatefulSet's maximum execution time spans its resizes as under Kueue's one Workload.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    top_level_workload_doc,
    workload_name,
)
from kqueue.api.integrations.declaration import Integration, KueueKeys, Ranks, Workloads, same_ranks
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c

APPS_GROUP: Final = "apps"
APPS_API_VERSION: Final = "apps/v1"
STATEFULSET_KIND: Final = "StatefulSet"
# The ordinal Kubernetes gives each of a StatefulSet's pods: its rank (Kueue's podIndexLabel).
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"


def replicas(sts: Mapping[str, Any]) -> int:
    """``spec.replicas`` (1 when unset, as the API server defaults it)."""
    value = (sts.get("spec") or {}).get("replicas", 1)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError("spec.replicas", f"must be a non-negative integer, got {value!r}")
    return value


def workload_name_for_statefulset(sts: Mapping[str, Any]) -> str:
    """The Workload's name; it follows the StatefulSet's generation, so each size's slice has
    its own name (a manifest without a generation counts as generation 1, as the API server
    starts every object)."""
    meta = sts.get("metadata") or {}
    generation = int(meta.get("generation") or 1)
    return workload_name(
        str(meta.get("name", "")),
        str(meta.get("uid") or ""),
        STATEFULSET_KIND,
        APPS_GROUP,
        extra=str(generation),
    )


def workload_for_statefulset(
    sts: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
    replacement_for: str | None = None,
) -> Workload:
    """The Workload kqueue creates for ``sts`` (a decoded apps/v1 StatefulSet).

    ``replacement_for`` (``namespace/name``) marks the WorkloadSlice of a scale-up that replaces
    the admitted one. Raises :class:`IntegrationError` naming the StatefulSet's field.
    """
    if sts.get("kind") != STATEFULSET_KIND:
        raise IntegrationError("kind", f"expected a StatefulSet, got {sts.get('kind')!r}")
    template = (sts.get("spec") or {}).get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise IntegrationError("spec.template.spec", "required")
    count = replicas(sts)
    if count == 0:
        raise IntegrationError(
            "spec.replicas", "a StatefulSet scaled to 0 has no Workload (it needs no quota)"
        )
    pod_template = copy.deepcopy(template)
    clean_template_metadata(pod_template)
    pod_set = {"name": c.DEFAULT_POD_SET_NAME, "count": count, "template": pod_template}
    # Kueue builds a StatefulSet's Workload with jobframework.NewWorkload from the StatefulSet
    # (statefulset_reconciler.go constructWorkload), so its labels are read as a Job's: the
    # queue, the priorities and kqueue.io/max-exec-time-seconds.
    doc = top_level_workload_doc(
        sts,
        api_version=APPS_API_VERSION,
        kind=STATEFULSET_KIND,
        name=workload_name_for_statefulset(sts),
        pod_sets=[pod_set],
        pod_specs=[template["spec"]],
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
        replacement_for=replacement_for,
    )
    return parse_workload(doc, template_paths=["spec.template"])


def _scaled_to_zero(sts: Mapping[str, Any]) -> bool:
    return replicas(sts) == 0


INTEGRATION: Final = Integration(
    framework="statefulset",
    api_version=APPS_API_VERSION,
    kind=STATEFULSET_KIND,
    workloads=Workloads.OWN,
    build=workload_for_statefulset,
    empty=_scaled_to_zero,
    needs=("pod",),
    queue_label_required=True,
    kueue_keys=KueueKeys.ON_CONVERT,
    ranks=same_ranks(Ranks(POD_INDEX_LABEL)),
    # Kueue keeps one Workload while a StatefulSet is resized; kqueue's slices carry its time.
    max_exec_time_spans_slices=True,
)
