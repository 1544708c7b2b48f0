"""Reading Kueue's controller Configuration (``config.kueue.x-k8s.io``) as kqueue's.

Kueue writes its Configuration without metadata (it is a file, not an object). What kqueue has
an equivalent for carries over to ``config.kqueue.io/v1alpha1``: the namespace, which jobs are
managed, waitForPodsReady, fair sharing, admission fair sharing, preemption protection (KEP-9876's
``preemptionProtection``, and its first revision's ``fairSharing.minAdmitDuration`` and
``reclaimMinAdmitDuration``), the frameworks kqueue
integrates, ``resources.transformations`` and ``excludeResourcePrefixes`` (quota counting),
``resources.deviceClassMappings`` (DRA quota; a mapping's capacity ``sources`` are
dropped), client throttling, leader election and the health, metrics and webhook servers, and
``multiKueue`` (gcInterval, origin, workerLostTimeout, dispatcherName with Kueue's built-in
dispatchers renamed, incrementalDispatcherConfig).
``featureGates`` carries over as it is: kqueue honours the gates it has a switch for and warns
about each other one by name (kqueue/api/feature_gates.py). Everything else (MultiKueue's
externalFrameworks and clusterProfile, resources.quotaCheckStrategy...) is dropped with a warning that names the field. Differences of
shape:

* v1beta2 turns fairSharing and waitForPodsReady on by their presence; v1beta1 by ``enable``
  (``enable: false`` drops the section);
* Kueue's ``health.healthProbeBindAddress`` and ``metrics.bindAddress`` are kqueue's
  ``health.bindAddress`` and ``metrics.bindAddress``.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.kueue import ConversionWarning

KUEUE_CONFIG_GROUP: Final = "config.kueue.x-k8s.io"
KUEUE_CONFIG_VERSIONS: Final = frozenset({"v1beta1", "v1beta2"})
KQUEUE_CONFIG_API_VERSION: Final = "config.kqueue.io/v1alpha1"

# Kueue sections copied as they are (their keys are kqueue's too).
_SAME: Final = (
    "namespace",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector",
    "admissionFairSharing",
    "clientConnection",
    "internalCertManagement",
    "featureGates",
)
# The first revision of Kueue's KEP-9876 (kubernetes-sigs/kueue#9877) named the reclaim path's
# protection so; its fair-sharing one was fairSharing.minAdmitDuration.
_RECLAIM_MIN_ADMIT: Final = "reclaimMinAdmitDuration"
_FIRST_REVISION: Final = {
    "reclaimWithinCohort": _RECLAIM_MIN_ADMIT,
    "fairSharing": "fairSharing.minAdmitDuration",
}
_LEADER_KEYS: Final = frozenset(
    {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceName",
     "resourceNamespace"}
)
_MULTIKUEUE_KEYS: Final = frozenset(
    {"gcInterval", "origin", "workerLostTimeout", "dispatcherName", "incrementalDispatcherConfig"}
)
# Kueue's built-in MultiKueue dispatchers -> kqueue's; any other name is an external one.
_DISPATCHERS: Final = {
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once": "kqueue.io/multikueue-dispatcher-all-at-once",
    "kueue.x-k8s.io/multikueue-dispatcher-incremental": "kqueue.io/multikueue-dispatcher-incremental",
}
_WAIT_KEYS: Final = frozenset(
    {"enable", "timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}
)


def is_kueue_configuration(doc: dict[str, Any]) -> bool:
    group, _, _ = str(doc.get("apiVersion", "")).partition("/")
    return group == KUEUE_CONFIG_GROUP and doc.get("kind") == "Configuration"


def _drop(warnings: list[ConversionWarning], path: str, why: str = "") -> None:
    warnings.append(ConversionWarning(path, why or "not supported by kqueue; ignored"))


def from_kueue_configuration(
    doc: dict[str, Any], supported_frameworks: frozenset[str] | tuple[str, ...]
) -> tuple[dict[str, Any], list[ConversionWarning]]:
    """Kueue's Configuration as a kqueue Configuration dict, and what was dropped."""
    api_version = str(doc.get("apiVersion", ""))
    version = api_version.partition("/")[2]
    if version not in KUEUE_CONFIG_VERSIONS:
        raise ValueError(
            f"apiVersion {api_version!r}: unsupported Kueue Configuration version; allowed: "
            + ", ".join(f"{KUEUE_CONFIG_GROUP}/{v}" for v in sorted(KUEUE_CONFIG_VERSIONS))
        )
    src = copy.deepcopy(doc)
    out: dict[str, Any] = {"apiVersion": KQUEUE_CONFIG_API_VERSION, "kind": "Configuration"}
    warnings: list[ConversionWarning] = []
    for key, value in src.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key in _SAME:
            out[key] = value
        elif key == "fairSharing":
            _fair_sharing(value, version, out, warnings)
        elif key == _RECLAIM_MIN_ADMIT:
            _protect(out, "reclaimWithinCohort", value, warnings)
        elif key == "preemptionProtection":
            _preemption_protection(value, out, warnings)
        elif key == "waitForPodsReady":
            _wait_for_pods_ready(value, version, out, warnings)
        elif key == "resources":
            _resources(value, out, warnings)
        elif key == "integrations":
            _integrations(value, supported_frameworks, out, warnings)
        elif key == "multiKueue":
            _multikueue(value, out, warnings)
        elif key == "leaderElection" and isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if k in _LEADER_KEYS}
            for k in sorted(set(value) - _LEADER_KEYS):
                _drop(warnings, f"leaderElection.{k}")
        elif key == "health" and isinstance(value, dict):
            if "healthProbeBindAddress" in value:
                out["health"] = {"bindAddress": value["healthProbeBindAddress"]}
            for k in sorted(set(value) - {"healthProbeBindAddress"}):
                _drop(warnings, f"health.{k}")
        elif key == "metrics" and isinstance(value, dict):
            metrics = {
                k: value[k] for k in ("bindAddress", "enableClusterQueueResources") if k in value
            }
            if metrics:
                out["metrics"] = metrics
            for k in sorted(set(value) - set(metrics)):
                _drop(warnings, f"metrics.{k}")
        elif key == "webhook" and isinstance(value, dict):
            webhook = {k: value[k] for k in ("host", "port", "certDir") if k in value}
            if webhook:
                out["webhook"] = webhook
            for k in sorted(set(value) - set(webhook)):
                _drop(warnings, f"webhook.{k}")
        else:
            _drop(warnings, key)
    return out, warnings


def _fair_sharing(
    value: Any, version: str, out: dict[str, Any], warnings: list[ConversionWarning]
) -> None:
    if not isinstance(value, dict):
        out["fairSharing"] = value  # kqueue's model names what is wrong with it
        return
    section = dict(value)
    if version == "v1beta1":
        enabled = section.pop("enable", False)
        if not enabled:
            _drop(warnings, "fairSharing", "enable is false (v1beta1): fair sharing stays off")
            return
    if "minAdmitDuration" in section:
        _protect(out, "fairSharing", section.pop("minAdmitDuration"), warnings)
    out["fairSharing"] = section


def _protect(
    out: dict[str, Any], path: str, value: Any, warnings: list[ConversionWarning]
) -> None:
    """A field of KEP-9876's first revision as kqueue's ``preemptionProtection.<path>``."""
    protection = out.setdefault("preemptionProtection", {})
    if not isinstance(protection, dict):
        return  # kqueue's model names what is wrong with it
    if path in protection:
        _drop(warnings, _FIRST_REVISION[path], f"preemptionProtection.{path} is given too and wins")
        return
    protection[path] = {"minAdmitDuration": value}


def _preemption_protection(
    value: Any, out: dict[str, Any], warnings: list[ConversionWarning]
) -> None:
    """KEP-9876's ``preemptionProtection``, kqueue's shape: it wins over the first revision's
    fields, whichever comes first in the document."""
    earlier = out.get("preemptionProtection")
    if not isinstance(value, dict) or not isinstance(earlier, dict):
        out["preemptionProtection"] = value  # kqueue's model names what is wrong with it
        return
    for path in sorted(set(earlier) & set(value)):
        _drop(warnings, _FIRST_REVISION[path], f"preemptionProtection.{path} is given too and wins")
    out["preemptionProtection"] = {**earlier, **value}


def _wait_for_pods_ready(
    value: Any, version: str, out: dict[str, Any], warnings: list[ConversionWarning]
) -> None:
    if not isinstance(value, dict):
        out["waitForPodsReady"] = value
        return
    section = {k: v for k, v in value.items() if k in _WAIT_KEYS}
    for k in sorted(set(value) - _WAIT_KEYS):
        _drop(warnings, f"waitForPodsReady.{k}")
    if version == "v1beta2":
        section.setdefault("enable", True)  # v1beta2: present means on
    out["waitForPodsReady"] = section


def _multikueue(value: Any, out: dict[str, Any], warnings: list[ConversionWarning]) -> None:
    if not isinstance(value, dict):
        out["multiKueue"] = value  # kqueue's model names what is wrong with it
        return
    section = {k: v for k, v in value.items() if k in _MULTIKUEUE_KEYS}
    for k in sorted(set(value) - _MULTIKUEUE_KEYS):
        _drop(warnings, f"multiKueue.{k}")
    name = section.get("dispatcherName")
    if isinstance(name, str) and name in _DISPATCHERS:
        section["dispatcherName"] = _DISPATCHERS[name]
    out["multiKueue"] = section


def _integrations(
    value: Any,
    supported: frozenset[str] | tuple[str, ...],
    out: dict[str, Any],
    warnings: list[ConversionWarning],
) -> None:
    if not isinstance(value, dict):
        out["integrations"] = value
        return
    frameworks = value.get("frameworks")
    if isinstance(frameworks, list):
        kept = [f for f in frameworks if f in supported]
        for i, f in enumerate(frameworks):
            if f not in supported:
                _drop(warnings, f"integrations.frameworks[{i}]", f"{f!r} is not integrated by kqueue")
        out["integrations"] = {"frameworks": kept}
    for k in sorted(set(value) - {"frameworks"}):
        _drop(warnings, f"integrations.{k}")


_MAPPING_KEYS: Final = frozenset({"name", "deviceClassNames", "sources"})


def _counter_sources(sources: list[Any], i: int, warnings: list[ConversionWarning]) -> list[Any]:
    """A mapping's ``sources``: counters carry over (partitionable devices); capacity sources
    (KueueDRAIntegrationConsumableCapacity, alpha) are dropped with a warning, and such a
    DeviceClass is counted by device."""
    kept: list[Any] = []
    for j, src in enumerate(sources):
        if isinstance(src, dict) and "capacity" in src and "counter" not in src:
            _drop(warnings, f"resources.deviceClassMappings[{i}].sources[{j}].capacity")
            continue
        kept.append(src)
    return kept


# Kueue ``resources`` fields kqueue reads as they are.
_KEPT_RESOURCES: Final = ("excludeResourcePrefixes", "transformations")


def _resources(value: Any, out: dict[str, Any], warnings: list[ConversionWarning]) -> None:
    """Kueue's ``resources``: its ``transformations`` and ``excludeResourcePrefixes`` carry
    over as they are, its DRA ``deviceClassMappings`` with their counter ``sources`` (a
    device's consumable capacity is not counted: capacity sources are dropped);
    ``quotaCheckStrategy`` is dropped."""
    if not isinstance(value, dict):
        out["resources"] = value  # kqueue's model names what is wrong with it
        return
    for k in sorted(set(value) - {"deviceClassMappings", *_KEPT_RESOURCES}):
        _drop(warnings, f"resources.{k}")
    kept_here = {k: value[k] for k in _KEPT_RESOURCES if k in value}
    if kept_here:
        out["resources"] = dict(kept_here)
    mappings = value.get("deviceClassMappings")
    if mappings is None:
        return
    if not isinstance(mappings, list):
        out["resources"] = {**kept_here, "deviceClassMappings": mappings}
        return
    kept: list[Any] = []
    for i, m in enumerate(mappings):
        if isinstance(m, dict):
            for k in sorted(set(m) - _MAPPING_KEYS):
                _drop(warnings, f"resources.deviceClassMappings[{i}].{k}")
            m = {k: v for k, v in m.items() if k in _MAPPING_KEYS}
            if isinstance(m.get("sources"), list):
                m["sources"] = _counter_sources(m["sources"], i, warnings)
        kept.append(m)
    out["resources"] = {**kept_here, "deviceClassMappings": kept}
