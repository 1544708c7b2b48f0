"""SparkApplication (sparkoperator.k8s.io/v1beta2) -> Workload, as Kueue's alpha
sparkapplication integration builds it (pkg/controller/jobs/sparkapplication).

Two pod sets: ``driver`` (1 pod) and ``executor`` (``spec.executor.instances`` pods, default 0).
Spark's pods are made by spark-submit and the driver, not from one template, so each pod set's
template is built as the Spark operator's pod defaulter builds the pods (Kueue's
``buildDriverPodTemplateSpec``): the role's ``template`` (if any) with its container
(``spark-kubernetes-driver`` / ``spark-kubernetes-executor``, else the first) given the role's
``coreRequest``, ``coreLimit``, ``memory`` and ``memoryLimit`` (Java sizes: ``1g`` is ``1Gi``),
its GPU as a limit, and its node selector, tolerations, affinity, priority class, init containers,
sidecars, labels and annotations. Only cluster mode without dynamic allocation can be queued
(:func:`spec_errors`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, KueueKeys, Workloads
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload

GROUP: Final = "sparkoperator.k8s.io"
API_VERSION: Final = f"{GROUP}/v1beta2"
KIND: Final = "SparkApplication"
PLURAL: Final = "sparkapplications"
DRIVER: Final = "driver"
EXECUTOR: Final = "executor"
# Labels the Spark operator and Spark put on an application's pods.
APP_NAME_LABEL: Final = "sparkoperator.k8s.io/app-name"
ROLE_LABEL: Final = "spark-role"
CONTAINER_NAMES: Final = {DRIVER: "spark-kubernetes-driver", EXECUTOR: "spark-kubernetes-executor"}
# status.applicationState.state values that end an application.
FINAL_STATES: Final = {"COMPLETED": "Succeeded", "FAILED": "Failed", "SUBMISSION_FAILED": "Failed"}
_JAVA_SIZE = re.compile(r"^(\d+)([kmgtp])b?$", re.IGNORECASE)


def java_memory(value: str, path: str) -> str:
    """A Java memory size (``512m``, ``1g``) as a Kubernetes quantity (``512Mi``, ``1Gi``); a
    quantity is kept as it is."""
    m = _JAVA_SIZE.match(value.strip())
    if m:
        return f"{m.group(1)}{m.group(2).upper()}i"
    if not re.match(r"^\d+(\.\d+)?([KMGTPE]i?|[kmun])?$", value.strip()):
        raise IntegrationError(path, f"not a memory size: {value!r} (a Java size such as 512m or 1g)")
    return value.strip()


def _role(app: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    spec = (app.get("spec") or {}).get(role)
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise IntegrationError(f"spec.{role}", "must be an object")
    return spec


def executor_instances(app: Mapping[str, Any]) -> int:
    value = _role(app, EXECUTOR).get("instances", 0)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError("spec.executor.instances", f"must be a non-negative integer, got {value!r}")
    return value


def pod_template(app: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The template of the role's pods, as the Spark operator's pod defaulter makes them."""
    spec = _role(app, role)
    path = f"spec.{role}"
    base = spec.get("template")
    template: dict[str, Any] = copy.deepcopy(dict(base)) if isinstance(base, Mapping) else {}
    meta = template.setdefault("metadata", {})
    pod = template.setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    if not containers:
        containers.append({"name": CONTAINER_NAMES[role]})
    index = next((i for i, ctr in enumerate(containers) if ctr.get("name") == CONTAINER_NAMES[role]), 0)
    container = containers[index]
    resources = container.setdefault("resources", {})
    for field, kind, key, convert in (
        ("coreRequest", "requests", "cpu", False),
        ("coreLimit", "limits", "cpu", False),
        ("memory", "requests", "memory", True),
        ("memoryLimit", "limits", "memory", True),
    ):
        value = spec.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise IntegrationError(f"{path}.{field}", f"must be a string, got {value!r}")
        resources.setdefault(kind, {})[key] = java_memory(value, f"{path}.{field}") if convert else value
    gpu = spec.get("gpu")
    if isinstance(gpu, Mapping) and gpu.get("name") and isinstance(gpu.get("quantity"), int) and gpu["quantity"] > 0:
        resources.setdefault("limits", {})[str(gpu["name"])] = str(gpu["quantity"])
    for ctr_field, spec_field in (("initContainers", "initContainers"), ("containers", "sidecars")):
        for extra in spec.get(spec_field) or []:
            have = pod.setdefault(ctr_field, [])
            if not any(c.get("name") == extra.get("name") and c.get("image") == extra.get("image") for c in have):
                have.append(copy.deepcopy(extra))
    if spec.get("priorityClassName"):
        pod["priorityClassName"] = spec["priorityClassName"]
    if spec.get("nodeSelector"):
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **spec["nodeSelector"]}
    if spec.get("affinity"):
        pod["affinity"] = copy.deepcopy(spec["affinity"])
    if spec.get("tolerations"):
        pod["tolerations"] = [*(pod.get("tolerations") or []), *copy.deepcopy(spec["tolerations"])]
    meta["labels"] = {**(meta.get("labels") or {}), **(spec.get("labels") or {})}
    meta["annotations"] = {**(meta.get("annotations") or {}), **(spec.get("annotations") or {})}
    clean_template_metadata(template)
    return template


def spec_errors(app: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` of what a queued SparkApplication cannot have (Kueue's
    ``validateCreate``): a mode other than cluster, dynamic allocation."""
    spec = app.get("spec") or {}
    errors: list[tuple[str, str]] = []
    if spec.get("mode", "cluster") != "cluster":
        errors.append(("spec.mode", f"only cluster mode can be queued, got {spec.get('mode')!r}"))
    if ((spec.get("dynamicAllocation") or {}).get("enabled")) is True:
        errors.append(
            (
                "spec.dynamicAllocation.enabled",
                "a queued SparkApplication cannot allocate executors dynamically: its quota is "
                "reserved for spec.executor.instances; set it to false (or remove the queue label)",
            )
        )
    return errors


def workload_name_for_sparkapplication(app: Mapping[str, Any]) -> str:
    return owner_workload_name(app, KIND, GROUP)


def workload_for_sparkapplication(
    app: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``app``; raises :class:`IntegrationError` naming the field."""
    if app.get("kind") != KIND:
        raise IntegrationError("kind", f"expected a SparkApplication, got {app.get('kind')!r}")
    errors = spec_errors(app)
    if errors:
        raise IntegrationError(*errors[0])
    templates = {DRIVER: pod_template(app, DRIVER), EXECUTOR: pod_template(app, EXECUTOR)}
    sets: list[dict[str, Any]] = [
        {"name": DRIVER, "count": 1, "template": templates[DRIVER]},
        {"name": EXECUTOR, "count": executor_instances(app), "template": templates[EXECUTOR]},
    ]
    doc = top_level_workload_doc(
        app,
        api_version=API_VERSION,
        kind=KIND,
        name=workload_name_for_sparkapplication(app),
        pod_sets=sets,
        pod_specs=[templates[DRIVER]["spec"], templates[EXECUTOR]["spec"]],
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
    )
    return parse_workload(doc, template_paths=["spec.driver", "spec.executor"])


def state(app: Mapping[str, Any]) -> str:
    return str(((app.get("status") or {}).get("applicationState") or {}).get("state") or "")


def finished_condition(app: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Succeeded|Failed, message)`` once its state is final (Kueue's ``Finished``)."""
    outcome = FINAL_STATES.get(state(app))
    if outcome is None:
        return None
    message = str(((app.get("status") or {}).get("applicationState") or {}).get("errorMessage") or "")
    return outcome, message or f"SparkApplication {state(app)}"


INTEGRATION: Final = Integration(
    framework="sparkoperator.k8s.io/sparkapplication",
    api_version=API_VERSION,
    kind=KIND,
    workloads=Workloads.OWN,
    build=workload_for_sparkapplication,
    finished=finished_condition,
    operator="spark-operator",
    kueue_keys=KueueKeys.ON_CONVERT,
)
