"""Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1) -> Workload, as Kueue builds it.

A TrainJob names a runtime (``spec.runtimeRef``: a ClusterTrainingRuntime, or a TrainingRuntime
in the TrainJob's namespace) whose JobSet template the Trainer turns into the JobSet it runs.
The Workload has one pod set per replicated Job of that template, computed as the Trainer's own
plugins compute the JobSet (v2.3.0), so kqueue quotes exactly the pods the Trainer will create:

* pods per Job: the Job template's ``parallelism`` (1 if unset); for the Job the template marks
  as the trainer step (label ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``) the
  runtime's ``mlPolicy.numNodes``, overridden by the TrainJob's ``spec.trainer.numNodes``. With an
  MPI policy the override goes to the Job named ``node`` instead, one node fewer when the
  launcher runs as a node (``mlPolicy.mpi.runLauncherAsNode``).
* Jobs per replicated Job: 1 for the trainer and initializer steps (the Trainer forces it),
  the template's ``replicas`` otherwise.
* the trainer's ``node`` container gets ``spec.trainer.resourcesPerNode`` merged over its
  resources (requests and limits key by key).
* the TrainJob's ``spec.runtimePatches`` are applied to the pod templates (labels, annotations,
  node selector, tolerations, affinity ...), except kqueue's own entry (manager
  :data:`RUNTIME_PATCH_MANAGER`), which carries the admission's scheduling directives and the
  gate: the Workload records the user's template.

The runtime is looked up through a :data:`RuntimeLookup`, so the controller (its informers) and
``kqueue simulate`` (the runtimes in its input) build the same Workload.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, Workloads
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload

TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINJOB_API_VERSION: Final = f"{TRAINER_GROUP}/v1alpha1"
TRAINJOB_KIND: Final = "TrainJob"
CLUSTER_RUNTIME_KIND: Final = "ClusterTrainingRuntime"
RUNTIME_KIND: Final = "TrainingRuntime"
RUNTIME_KINDS: Final = (CLUSTER_RUNTIME_KIND, RUNTIME_KIND)
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER: Final = "trainer"
INITIALIZER_STEPS: Final = frozenset({"dataset-initializer", "model-initializer"})
NODE: Final = "node"
"""The trainer Job's and its container's name in the Trainer's runtimes."""
RUNTIME_PATCH_MANAGER: Final = "kqueue.io/manager"
"""The ``spec.runtimePatches`` entry kqueue owns (Kueue's is ``kueue.x-k8s.io/manager``)."""

RuntimeLookup = Callable[[str, str | None, str], Mapping[str, Any] | None]
"""``(kind, namespace or None for a cluster runtime, name) -> runtime object or None``."""


def no_runtimes(_kind: str, _namespace: str | None, _name: str) -> None:
    return None


def runtime_ref(trainjob: Mapping[str, Any]) -> tuple[str, str]:
    """``(kind, name)`` of the runtime the TrainJob names; raises naming the field."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        raise IntegrationError("spec.runtimeRef.name", "required: the training runtime to run")
    group = ref.get("apiGroup") or TRAINER_GROUP
    kind = ref.get("kind") or CLUSTER_RUNTIME_KIND
    if group != TRAINER_GROUP:
        raise IntegrationError("spec.runtimeRef.apiGroup", f"must be {TRAINER_GROUP!r}, got {group!r}")
    if kind not in RUNTIME_KINDS:
        raise IntegrationError(
            "spec.runtimeRef.kind", f"must be one of {', '.join(RUNTIME_KINDS)}, got {kind!r}"
        )
    return str(kind), str(ref["name"])


def find_runtime(trainjob: Mapping[str, Any], runtimes: RuntimeLookup) -> Mapping[str, Any]:
    kind, name = runtime_ref(trainjob)
    namespace = str((trainjob.get("metadata") or {}).get("namespace") or "default")
    found = runtimes(kind, namespace if kind == RUNTIME_KIND else None, name)
    if found is None:
        where = f" in namespace {namespace}" if kind == RUNTIME_KIND else ""
        raise IntegrationError(
            "spec.runtimeRef.name",
            f"{kind} {name!r} not found{where}: create it, or name an existing runtime "
            f"(spec.runtimeRef.kind selects {CLUSTER_RUNTIME_KIND} or a namespaced {RUNTIME_KIND})",
        )
    return found


# --- runtimePatches: a strategic merge of the fields a patch may carry --------------------------

# Lists the Kubernetes schema merges by key; every other list is replaced.
_MERGE_KEYS: Final = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "schedulingGates": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
}


def _strategic_merge(base: Any, patch: Any, key: str = "") -> Any:
    if isinstance(base, dict) and isinstance(patch, Mapping):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _strategic_merge(base.get(k), v, str(k)) if k in base else copy.deepcopy(v)
        return out
    merge_key = _MERGE_KEYS.get(key)
    if merge_key and isinstance(base, list) and isinstance(patch, list):
        out_list = [copy.deepcopy(x) for x in base]
        for item in patch:
            at = next(
                (i for i, x in enumerate(out_list)
                 if isinstance(x, dict) and isinstance(item, Mapping) and x.get(merge_key) == item.get(merge_key)),
                None,
            )
            if at is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[at] = _strategic_merge(out_list[at], item)
        return out_list
    return copy.deepcopy(patch)


def _patched_rjobs(trainjob: Mapping[str, Any], rjobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_name = {str(r.get("name")): r for r in rjobs}
    for i, patch in enumerate((trainjob.get("spec") or {}).get("runtimePatches") or []):
        if not isinstance(patch, Mapping) or patch.get("manager") == RUNTIME_PATCH_MANAGER:
            continue
        spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for j, rpatch in enumerate(spec.get("replicatedJobs") or []):
            name = str((rpatch or {}).get("name") or "")
            if name not in by_name:
                raise IntegrationError(
                    f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}].name",
                    f"no replicated Job {name!r} in the runtime; it has: {', '.join(by_name)}",
                )
            template = (rpatch or {}).get("template") or {}
            target = by_name[name]
            merged = _strategic_merge(target.get("template") or {}, template)
            target["template"] = merged
    return rjobs


# --- pod sets ------------------------------------------------------------------------------------


def _int(value: Any, default: int, path: str) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError(path, f"must be a non-negative integer, got {value!r}")
    return value


def _merge_resources(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for part in ("requests", "limits"):
        if override.get(part):
            out[part] = {**(out.get(part) or {}), **dict(override[part])}
    return out


def runtime_pod_sets(
    trainjob: Mapping[str, Any], runtime: Mapping[str, Any]
) -> list[tuple[str, int, dict[str, Any]]]:
    """``(name, pods, pod template)`` per replicated Job of the JobSet the Trainer creates."""
    rt_meta = runtime.get("metadata") or {}
    rt_name = f"{runtime.get('kind') or 'runtime'} {rt_meta.get('name')!r}"
    rt_spec = runtime.get("spec") or {}
    rjobs = copy.deepcopy(((rt_spec.get("template") or {}).get("spec") or {}).get("replicatedJobs"))
    if not isinstance(rjobs, list) or not rjobs:
        raise IntegrationError(
            "spec.runtimeRef.name", f"{rt_name} has no spec.template.spec.replicatedJobs"
        )
    for i, rjob in enumerate(rjobs):
        if not isinstance(rjob, dict) or not rjob.get("name"):
            raise IntegrationError(
                "spec.runtimeRef.name", f"{rt_name}: spec.template.spec.replicatedJobs[{i}].name is required"
            )
    rjobs = _patched_rjobs(trainjob, rjobs)
    ml_policy = rt_spec.get("mlPolicy")
    mpi = (ml_policy or {}).get("mpi")
    launcher_as_node = bool((mpi or {}).get("runLauncherAsNode"))
    trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    num_nodes = _int(trainer.get("numNodes"), 1, "spec.trainer.numNodes") if "numNodes" in trainer else None
    resources_per_node = trainer.get("resourcesPerNode")

    out: list[tuple[str, int, dict[str, Any]]] = []
    for rjob in rjobs:
        name = str(rjob["name"])
        job_template = rjob.get("template") or {}
        ancestor = ((job_template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL)
        job_spec = job_template.get("spec") or {}
        pod_template = job_spec.get("template")
        if not isinstance(pod_template, dict) or not isinstance(pod_template.get("spec"), dict):
            raise IntegrationError(
                "spec.runtimeRef.name",
                f"{rt_name}: replicated Job {name!r} has no template.spec.template.spec",
            )
        count = _int(job_spec.get("parallelism"), 1, "spec.runtimeRef.name")
        if ancestor == ANCESTOR_TRAINER and ml_policy is not None:
            count = _int(ml_policy.get("numNodes"), 1, "spec.runtimeRef.name")
        # The ML policy plugins: the TrainJob's numNodes is the number of trainer nodes.
        if num_nodes is not None:
            if mpi is not None:
                if name == NODE:
                    count = max(num_nodes - 1, 1) if launcher_as_node else num_nodes
            elif ancestor == ANCESTOR_TRAINER:
                count = num_nodes
        if isinstance(resources_per_node, Mapping) and (
            (ancestor == ANCESTOR_TRAINER and ml_policy is not None) or (launcher_as_node and name == NODE)
        ):
            for container in pod_template["spec"].get("containers") or []:
                if isinstance(container, dict) and container.get("name") == NODE:
                    container["resources"] = _merge_resources(container.get("resources") or {}, resources_per_node)
                    break
        if ancestor == ANCESTOR_TRAINER or ancestor in INITIALIZER_STEPS:
            replicas = 1
        else:
            replicas = _int(rjob.get("replicas"), 1, "spec.runtimeRef.name")
        template = copy.deepcopy(pod_template)
        clean_template_metadata(template)
        out.append((name, replicas * count, template))
    return out


def workload_name_for_trainjob(trainjob: Mapping[str, Any]) -> str:
    return owner_workload_name(trainjob, TRAINJOB_KIND, TRAINER_GROUP)


def workload_for_trainjob(
    trainjob: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    runtimes: RuntimeLookup = no_runtimes,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``trainjob``; raises :class:`IntegrationError` naming the
    TrainJob's field (``spec.runtimeRef.name`` when its runtime is missing or unusable)."""
    if trainjob.get("kind") != TRAINJOB_KIND:
        raise IntegrationError("kind", f"expected a TrainJob, got {trainjob.get('kind')!r}")
    runtime = find_runtime(trainjob, runtimes)
    sets = runtime_pod_sets(trainjob, runtime)
    pod_sets = [{"name": name, "count": count, "template": tpl} for name, count, tpl in sets]
    doc = top_level_workload_doc(
        trainjob,
        api_version=TRAINJOB_API_VERSION,
        kind=TRAINJOB_KIND,
        name=workload_name_for_trainjob(trainjob),
        pod_sets=pod_sets,
        pod_specs=[tpl.get("spec") or {} for _, _, tpl in sets],
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
    )
    return parse_workload(doc, template_paths=["spec.runtimeRef.name"] * len(pod_sets))


def finished_condition(trainjob: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Complete|Failed, message)`` once the TrainJob finished."""
    for cond in (trainjob.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("message") or cond.get("reason") or "")
    return None


def runtimes_from(objects: Iterable[Mapping[str, Any]]) -> RuntimeLookup:
    """A lookup over runtime objects (simulate's input, a test's fixtures)."""
    table: dict[tuple[str, str | None, str], Mapping[str, Any]] = {}
    for obj in objects:
        kind = obj.get("kind")
        if kind not in RUNTIME_KINDS:
            continue
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or "default") if kind == RUNTIME_KIND else None
        table[(str(kind), ns, str(meta.get("name")))] = obj

    def lookup(kind: str, namespace: str | None, name: str) -> Mapping[str, Any] | None:
        return table.get((kind, namespace, name))

    return lookup


def _inputs(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    # Its pod sets come from the runtime it names, which must be in the same input.
    return {"runtimes": runtimes_from(objects)}


INTEGRATION: Final = Integration(
    framework="trainer.kubeflow.org/trainjob",
    api_version=TRAINJOB_API_VERSION,
    kind=TRAINJOB_KIND,
    workloads=Workloads.OWN,
    build=workload_for_trainjob,
    finished=finished_condition,
    inputs=_inputs,
    reads=tuple((TRAINJOB_API_VERSION, kind) for kind in RUNTIME_KINDS),
    operator="trainer",
)
