"""Validation of the admission-check API: AdmissionCheck, ProvisioningRequestConfig,
MultiKueueConfig, MultiKueueCluster, a
ClusterQueue's admissionChecksStrategy and a Workload's status.admissionChecks (Kueue v1beta2's
CEL rules and webhooks). Called from :mod:`kqueue.api.v1alpha1.validation`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from kqueue.api.v1alpha1.admissioncheck import AdmissionCheck, ProvisioningRequestConfig
from kqueue.api.v1alpha1.base import SUBDOMAIN_ALLOWED, is_dns1123_subdomain
from kqueue.api.v1alpha1.clusterqueue import AdmissionChecksStrategy
from kqueue.api.v1alpha1.multikueue import MultiKueueCluster, MultiKueueConfig
from kqueue.api.v1alpha1.workload import Workload

# Kueue's Parameter type: a value of spec.parameters is at most this long.
MAX_PARAMETER_LENGTH: Final = 255

Add = Callable[[str, str, str], None]


def _duplicates(values: Iterable[str], path: str, what: str, add: Add) -> None:
    seen: set[str] = set()
    for i, v in enumerate(values):
        if v in seen:
            add(f"{path}[{i}]", f"duplicate {what} {v!r}", f"each {what} once")
        seen.add(v)


def validate_strategy(strategy: AdmissionChecksStrategy | None, add: Add) -> None:
    if strategy is None:
        return
    path = "spec.admissionChecksStrategy.admissionChecks"
    _duplicates((r.name for r in strategy.admission_checks), path, "admission check", add)
    for i, rule in enumerate(strategy.admission_checks):
        _duplicates(rule.on_flavors, f"{path}[{i}].onFlavors", "flavor", add)


def validate_workload_cluster_update(old: Workload, new: Workload, add: Add) -> None:
    was, now = old.status.cluster_name, new.status.cluster_name
    if was is not None and now is not None and was != now:
        add("status.clusterName", "is immutable once set (it can be cleared)", repr(was))


def validate_admission_check_update(old: AdmissionCheck, new: AdmissionCheck, add: Add) -> None:
    if old.spec.controller_name != new.spec.controller_name:
        add("spec.controllerName", "field is immutable", repr(old.spec.controller_name))


def validate_provisioning_config(prc: ProvisioningRequestConfig, add: Add) -> None:
    spec = prc.spec
    for key, value in spec.parameters.items():
        if len(value) > MAX_PARAMETER_LENGTH:
            add(
                f"spec.parameters.{key}",
                f"value is {len(value)} characters long",
                f"at most {MAX_PARAMETER_LENGTH} characters",
            )
    _duplicates(spec.managed_resources, "spec.managedResources", "resource", add)
    if spec.pod_set_updates is not None:
        _duplicates(
            (u.key for u in spec.pod_set_updates.node_selector),
            "spec.podSetUpdates.nodeSelector",
            "key",
            add,
        )


def validate_workload_checks(wl: Workload, add: Add) -> None:
    if wl.status.cluster_name is not None and wl.status.nominated_cluster_names:
        add(
            "status.nominatedClusterNames",
            "must be empty while status.clusterName is set (they are mutually exclusive)",
            "[]",
        )
    path = "status.admissionChecks"
    _duplicates((s.name for s in wl.status.admission_checks), path, "admission check", add)
    pod_sets = [ps.name for ps in wl.spec.pod_sets]
    for i, state in enumerate(wl.status.admission_checks):
        for j, update in enumerate(state.pod_set_updates):
            if update.name not in pod_sets:
                add(
                    f"{path}[{i}].podSetUpdates[{j}].name",
                    f"unknown pod set {update.name!r}",
                    ", ".join(pod_sets),
                )


def validate_multikueue_config(cfg: MultiKueueConfig, add: Add) -> None:
    _duplicates(cfg.spec.clusters, "spec.clusters", "cluster", add)
    for i, name in enumerate(cfg.spec.clusters):
        if not is_dns1123_subdomain(name):
            add(f"spec.clusters[{i}]", f"{name!r} is not a MultiKueueCluster name", SUBDOMAIN_ALLOWED)


def validate_multikueue_cluster(mkc: MultiKueueCluster, add: Add) -> None:
    source = mkc.spec.cluster_source
    if (source.kube_config is None) == (source.cluster_profile_ref is None):
        add(
            "spec.clusterSource",
            "set exactly one of kubeConfig and clusterProfileRef",
            "kubeConfig{locationType: Secret|Path, location}",
        )
    kc = source.kube_config
    if kc is not None and kc.location_type == "Secret" and not is_dns1123_subdomain(kc.location):
        add(
            "spec.clusterSource.kubeConfig.location",
            f"{kc.location!r} is not a Secret name",
            SUBDOMAIN_ALLOWED,
        )
