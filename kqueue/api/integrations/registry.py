"""The one list of kinds kqueue integrates: each kind's module declares its :class:`Integration`
(``INTEGRATION``), collected here in the order of the docs' table and the chart's rules.

Everything that names kinds reads this list: the Configuration's framework names and their
needs (kqueue.api.config), which objects kqueue manages (.management), the manifest loader
(kqueue.api.loader), ``kqueue simulate`` and ``explain``, and the controller's registry, which
checks that every declared kind has its controller package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kqueue.api.integrations import (
    appwrapper,
    deployment,
    job,
    jobset,
    kubeflow,
    leaderworkerset,
    mpijob,
    pod,
    ray,
    sparkapplication,
    statefulset,
    trainjob,
)
from kqueue.api.integrations.common import IntegrationError
from kqueue.api.integrations.declaration import Integration, KueueKeys, Obj, Ranks, Workloads
from kqueue.api.v1alpha1 import Workload

INTEGRATIONS: Final[tuple[Integration, ...]] = (
    job.INTEGRATION,
    pod.INTEGRATION,
    jobset.INTEGRATION,
    mpijob.INTEGRATION,
    trainjob.INTEGRATION,
    statefulset.INTEGRATION,
    deployment.INTEGRATION,
    ray.RAYJOB,
    ray.RAYCLUSTER,
    ray.RAYSERVICE,
    leaderworkerset.INTEGRATION,
    *kubeflow.INTEGRATIONS,
    appwrapper.INTEGRATION,
    sparkapplication.INTEGRATION,
)
BY_FRAMEWORK: Final[dict[str, Integration]] = {i.framework: i for i in INTEGRATIONS}
BY_KIND: Final[dict[tuple[str, str], Integration]] = {(i.api_version, i.kind): i for i in INTEGRATIONS}

# The names ``integrations.frameworks`` accepts, those on when it lists none, and the frameworks
# each one needs (Kueue enables them implicitly; kqueue asks for them).
SUPPORTED_FRAMEWORKS: Final[tuple[str, ...]] = tuple(BY_FRAMEWORK)
DEFAULT_FRAMEWORKS: Final[tuple[str, ...]] = tuple(i.framework for i in INTEGRATIONS if i.default_enabled)
FRAMEWORK_NEEDS: Final[dict[str, tuple[str, ...]]] = {i.framework: i.needs for i in INTEGRATIONS if i.needs}


def of(api_version: str, kind: str) -> Integration | None:
    """The integration of ``(apiVersion, kind)``; None for a kind kqueue does not integrate."""
    return BY_KIND.get((api_version, kind))


def ranks(api_version: str, kind: str, obj: Obj, wl: Workload) -> Mapping[str, Ranks]:
    """Per pod set of ``wl``, the labels its pods' ranks are read from, as the integration of
    ``obj`` declares them (:attr:`Integration.ranks`). For a pod, that of the kind whose pods
    the pod integration queues for it (a LeaderWorkerSet's), else the pod integration's; empty
    when there are none, or the object no longer parses."""
    integration = of(api_version, kind)
    if integration is not None and integration.workloads is Workloads.POD:
        integration = next(
            (i for i in INTEGRATIONS if i.pod_of is not None and i.pod_of(obj)), integration
        )
    if integration is None or integration.ranks is None:
        return {}
    try:
        return integration.ranks(obj, wl)
    except IntegrationError:
        return {}


def max_exec_time_spans_slices(wl: Workload) -> bool:
    """Whether ``wl``, a WorkloadSlice replacing an admitted one, starts with the time that one
    used: as the kind of its controlling owner declares it
    (:attr:`Integration.max_exec_time_spans_slices`); False without one."""
    for ref in wl.metadata.owner_references:
        if ref.controller:
            integration = of(ref.api_version, ref.kind)
            return integration is not None and integration.max_exec_time_spans_slices
    return False


def read_kinds() -> frozenset[tuple[str, str]]:
    """Every ``(apiVersion, kind)`` the integrations read: their own and what their Workloads are
    built from."""
    return frozenset({*BY_KIND, *(r for i in INTEGRATIONS for r in i.reads)})


__all__ = [
    "BY_FRAMEWORK",
    "BY_KIND",
    "DEFAULT_FRAMEWORKS",
    "FRAMEWORK_NEEDS",
    "INTEGRATIONS",
    "SUPPORTED_FRAMEWORKS",
    "Integration",
    "KueueKeys",
    "Workloads",
    "max_exec_time_spans_slices",
    "of",
    "ranks",
    "read_kinds",
]
