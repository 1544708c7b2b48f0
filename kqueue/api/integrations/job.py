"""batch/v1 Job -> Workload, as Kueue's job integration builds it.

One pod set ``main`` with ``parallelism`` pods (fewer if ``completions`` is lower), the pod
template copied, the Workload owned by the Job and named deterministically from it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    annotations_of,
    clean_template_metadata,
    top_level_workload_doc,
    workload_name,
)
from kqueue.api.integrations.declaration import Integration, KueueKeys, Ranks, Workloads, same_ranks
from kqueue.api.v1alpha1 import ValidationFailed, Workload, parse_object
from kqueue.api.v1alpha1 import constants as c

JOB_API_VERSION: Final = "batch/v1"
JOB_KIND: Final = "Job"
JOB_GROUP: Final = "batch"


def _int_field(spec: Mapping[str, Any], name: str, default: int | None) -> int | None:
    value = spec.get(name, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError(f"spec.{name}", f"must be a non-negative integer, got {value!r}")
    return value


def pods_count(job: Mapping[str, Any]) -> int:
    """Kueue's ``podsCount``: parallelism (default 1), capped by completions."""
    spec = job.get("spec") or {}
    parallelism = _int_field(spec, "parallelism", 1)
    completions = _int_field(spec, "completions", None)
    assert parallelism is not None
    if completions is not None and completions < parallelism:
        return completions
    return parallelism


def min_pods_count(job: Mapping[str, Any], count: int) -> int | None:
    """Partial admission: the ``kqueue.io/job-min-parallelism`` annotation.

    Kueue's job webhook accepts an integer strictly between 0 and parallelism.
    """
    raw = annotations_of(job).get(c.JOB_MIN_PARALLELISM_ANNOTATION)
    if raw is None:
        return None
    path = f"metadata.annotations[{c.JOB_MIN_PARALLELISM_ANNOTATION}]"
    try:
        value = int(raw)
    except ValueError:
        raise IntegrationError(path, f"must be an integer, got {raw!r}") from None
    if not 0 < value < count:
        raise IntegrationError(path, f"should be between 0 and {count - 1}, got {value}")
    return value


def finished_condition(job: Mapping[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` once the Job finished (the condition that is True), else None.

    Not ``SuccessCriteriaMet``/``FailureTarget``: the Job controller sets Complete/Failed once
    every pod has terminated. A finished Job gets no Workload (Kueue's job reconciler).
    """
    status = job.get("status")
    conditions = (status.get("conditions") if isinstance(status, Mapping) else None) or []
    for cond in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(cond, Mapping)
            and cond.get("type") in ("Complete", "Failed")
            and cond.get("status") == "True"
        ):
            return str(cond["type"])
    return None


def is_elastic(job: Mapping[str, Any], *, slices: bool = True) -> bool:
    """Whether the Job grows and shrinks through WorkloadSlices. ``slices`` is the
    Configuration's ElasticJobsViaWorkloadSlices gate: off, the annotation has no effect
    (Kueue's ``workloadslicing.Enabled``), and the Job is sized as any other."""
    return slices and annotations_of(job).get(c.ELASTIC_JOB_ANNOTATION) == "true"


def workload_name_for_job(job: Mapping[str, Any], *, slices: bool = True) -> str:
    """The Workload's name; an elastic job's slices differ by the Job's generation."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name", ""))
    uid = str(meta.get("uid") or "")
    extra = str(int(meta.get("generation") or 0)) if is_elastic(job, slices=slices) else ""
    return workload_name(name, uid, JOB_KIND, JOB_GROUP, extra=extra)


def workload_for_job(
    job: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
    replacement_for: str | None = None,
    slices: bool = True,
) -> Workload:
    """The Workload kqueue creates for ``job`` (a decoded batch/v1 Job).

    ``priorities`` resolves the ``kqueue.io/priority-class`` and
    ``kqueue.io/preemption-priority-class`` labels and the template's ``priorityClassName``.
    ``replacement_for`` (``namespace/name``) marks a WorkloadSlice that replaces an admitted one
    after a scale-up of an elastic job; ``slices`` is the ElasticJobsViaWorkloadSlices gate
    (:func:`is_elastic`). Raises :class:`IntegrationError` naming the Job's field.
    """
    if job.get("kind") != JOB_KIND:
        raise IntegrationError("kind", f"expected a Job, got {job.get('kind')!r}")
    spec = job.get("spec") or {}
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise IntegrationError("spec.template.spec", "required")
    count = pods_count(job)
    min_count = min_pods_count(job, count)

    pod_template = copy.deepcopy(template)
    clean_template_metadata(pod_template)
    pod_set: dict[str, Any] = {
        "name": c.DEFAULT_POD_SET_NAME,
        "count": count,
        "template": pod_template,
    }
    if min_count is not None:
        pod_set["minCount"] = min_count

    doc = top_level_workload_doc(
        job,
        api_version=JOB_API_VERSION,
        kind=JOB_KIND,
        name=workload_name_for_job(job, slices=slices),
        pod_sets=[pod_set],
        pod_specs=[template["spec"]],
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
        replacement_for=replacement_for,
    )
    return parse_workload(doc, template_paths=["spec.template"])


def parse_workload(doc: dict[str, Any], *, template_paths: Sequence[str]) -> Workload:
    """The Workload ``doc`` describes; an error in pod set ``i``'s template is reported at the
    owner's field ``template_paths[i]``, where the user can fix it."""
    try:
        wl = parse_object(doc)
    except ValidationFailed as err:
        first = err.errors[0]
        path = first.path
        for i, owner_path in enumerate(template_paths):
            prefix = f"spec.podSets[{i}].template"
            if path.startswith(prefix):
                path = owner_path + path[len(prefix) :]
                break
        detail = first.message + (f" (allowed: {first.allowed})" if first.allowed else "")
        raise IntegrationError(path, detail) from None
    assert isinstance(wl, Workload)
    return wl


def finished(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """:func:`finished_condition` as every kind reports it: ``(reason, message)``."""
    reason = finished_condition(job)
    return None if reason is None else (reason, "")


# An Indexed Job's pod's completion index: its rank (Kueue's podIndexLabel for Jobs).
COMPLETION_INDEX_LABEL: Final = "batch.kubernetes.io/job-completion-index"

INTEGRATION: Final = Integration(
    framework="batch/job",
    api_version=JOB_API_VERSION,
    kind=JOB_KIND,
    workloads=Workloads.OWN,
    build=workload_for_job,
    finished=finished,
    elastic=is_elastic,
    default_enabled=True,
    kueue_keys=KueueKeys.WORKLOAD_OBJECT,
    ranks=same_ranks(Ranks(COMPLETION_INDEX_LABEL)),
)
