"""Admission webhooks for batch/v1 Jobs: gate their pods at creation, reject bad settings.

Mutating:

* CREATE: a Job that names a queue gets the ``kqueue.io/admission`` scheduling gate and the
  ``kqueue.io/managed: "true"`` label in ``spec.template`` (its pods are born held, and kqueue's
  pod informer sees them), and is suspended while queued (``spec.suspend: true`` with the
  annotation ``kqueue.io/suspended-by-kqueue``), so it has no pods until admitted. A Job its user
  created suspended is left suspended without the annotation: it is the user's until resumed.
  A Job that runs in waves (more completions than parallelism, or partial admission) gets
  ``kqueue.io/gang-scheduling: "false"`` in its pod template: no gang placement for its pods.
* UPDATE: a resume (``spec.suspend`` true -> false) by anyone but kqueue is turned into queueing:
  the Job stays suspended, now by kqueue, until its Workload is admitted (kqueue resumes it and
  drops the annotation in one patch, which is how its own resume is told apart).

Validating (CREATE, UPDATE): the partial-admission annotation must be an integer between 0 and
parallelism, and cannot be combined with an elastic job (checked whenever either annotation is
set or changed); the elastic annotation cannot be added or removed after creation (Kueue's rule:
an elastic Job's Workloads are slices named by generation, a non-elastic Job's Workload is not,
so a switch would give a running Job a second Workload); the queue and priority-class labels
cannot change while the Job runs. ``spec.scheduling.schedulingPolicy.gang.minCount``
(``Job.spec.scheduling``, Kubernetes gate ``WorkloadWithJob``) is refused when set: the Job
controller then makes the Job's own PodGroup, and kqueue cooperates with it only while its
``minCount`` follows ``spec.parallelism`` (the default), which kqueue sets to the admitted count;
a fixed minCount larger than a partial admission would never be placed.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.integrations import IntegrationError, is_elastic, pods_count
from kqueue.api.integrations.job import min_pods_count
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.advice import LocalQueueNames, queue_warnings
from kqueue.controller.integrations.queue_labels import max_exec_label_errors
from kqueue.controller.integrations.suspension import (
    SuspendableKind,
    SuspendableWebhooks,
    gate_templates,
    mutate_suspendable,
)
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict
from kqueue.controller.webhooks.shape import request_shape_errors

Obj = dict[str, Any]

MUTATE_PATH = "/mutate-batch-v1-job"
VALIDATE_PATH = "/validate-batch-v1-job"


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def managed(job: Obj, *, without_queue_name: bool = False) -> bool:
    return without_queue_name or bool(_labels(job).get(c.QUEUE_NAME_LABEL))


def inject_gate(job: Obj) -> Obj | None:
    """The Job with the gate and the managed label in its pod template; None if both are there."""
    out = copy.deepcopy(job)
    template = out.setdefault("spec", {}).setdefault("template", {})
    return out if gate_templates([template]) else None


def _template(job: Obj) -> list[Obj]:
    return [job.setdefault("spec", {}).setdefault("template", {})]


def _started(old: Obj) -> bool:
    # A running Job the Job controller has not reset yet: not a queued one.
    return bool((old.get("status") or {}).get("startTime"))


def runs_in_waves(job: Obj) -> bool:
    """Whether the Job's pods may run in successive waves: more completions than pods at once
    (or than a partial admission may leave). kube-scheduler counts only live pods toward a
    gang's minCount, so a last wave smaller than the admitted count would never be placed."""
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    if completions is None:
        return False  # a work queue: its pods start together and are not replaced on success
    parallelism = spec.get("parallelism", 1)
    partial = c.JOB_MIN_PARALLELISM_ANNOTATION in _annotations(job)
    return bool(int(completions) > int(parallelism) or (partial and int(completions) > 1))


SCHEDULING_MIN_COUNT_FIELD: Final = "spec.scheduling.schedulingPolicy.gang.minCount"


def scheduling_errors(job: Obj, old: Obj | None) -> list[FieldError]:
    """A Job's own gang size (``Job.spec.scheduling``) on a Job kqueue manages: refused when
    set or changed, since kqueue sizes the gang to the admission (see the module doc)."""

    def min_count(obj: Obj | None) -> object:
        spec = (obj or {}).get("spec") or {}
        policy = (spec.get("scheduling") or {}).get("schedulingPolicy") or {}
        return (policy.get("gang") or {}).get("minCount")

    value = min_count(job)
    if value is None or (old is not None and min_count(old) == value):
        return []
    return [
        FieldError(
            SCHEDULING_MIN_COUNT_FIELD,
            f"must not be set on a Job kqueue manages (got {value!r}): kqueue admits the Job's "
            "pods as a gang and sets spec.parallelism to the admitted count, and the Job "
            "controller's PodGroup follows spec.parallelism when minCount is unset; remove "
            "minCount (keep schedulingPolicy.gang: {})",
        )
    ]


def _gang_opt_out(job: Obj, verdict: Verdict) -> Verdict:
    """A Job that runs in waves keeps its pods out of gang scheduling (see gang.py)."""
    if not runs_in_waves(job):
        return verdict
    out = copy.deepcopy(verdict.patched if verdict.patched is not None else job)
    meta = out.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    if c.GANG_SCHEDULING_ANNOTATION in annotations:
        return verdict  # the user's choice stands
    meta["annotations"] = {**annotations, c.GANG_SCHEDULING_ANNOTATION: "false"}
    return Verdict.patch(out, *verdict.warnings)


def _elastic_topology_errors(job: Obj) -> list[FieldError]:
    """Kueue's rule: an elastic Job's slices may be placed only ``unconstrained`` (its
    ElasticJobsViaWorkloadSlicesWithTAS is off), so a required or preferred level is refused."""
    meta = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return [
        FieldError(
            f"spec.template.metadata.annotations[{key}]",
            f"{mode} topology is not supported with elastic jobs",
        )
        for key, mode in (
            (c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION, "required"),
            (c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION, "preferred"),
        )
        if key in annotations
    ][:1]  # Kueue reports the first only


# A batch Job is suspendable as the other kinds are; its own checks (partial admission, elastic
# Jobs, gang opt-out) are added by :class:`JobWebhooks`.
SUSPENDABLE: Final = SuspendableKind(kind="Job", pod_templates=_template, started=_started)


class JobWebhooks(SuspendableWebhooks):
    def __init__(
        self,
        *,
        manage_jobs_without_queue_name: bool = False,
        local_queues: LocalQueueNames = lambda _namespace: None,
        parent_kinds: frozenset[tuple[str, str]] = frozenset(),
        slices: bool = True,
        topology: bool = True,
    ) -> None:
        # The ElasticJobsViaWorkloadSlices gate: off, the elastic annotation has no effect, so
        # none of its rules apply (Kueue's workloadslicing.Enabled in its Job webhook).
        self._slices = slices
        self._topology = topology
        super().__init__(
            SUSPENDABLE,
            manage_jobs_without_queue_name=manage_jobs_without_queue_name,
            local_queues=local_queues,
            parent_kinds=parent_kinds,
        )

    async def mutate(self, req: AdmissionRequest) -> Verdict:
        if errors := request_shape_errors(req.object, req.old_object, "Job"):
            return Verdict.deny(*errors)
        job = req.object or {}
        if not self._manages(job):
            return Verdict.allow()
        verdict = mutate_suspendable(req, kind="Job", pod_templates=_template, started=_started)
        if req.operation == "CREATE" and verdict.allowed:
            verdict = _gang_opt_out(job, verdict)
        return verdict

    async def validate(self, req: AdmissionRequest) -> Verdict:
        if shape := request_shape_errors(req.object, req.old_object, "Job"):
            return Verdict.deny(*shape)
        job = req.object or {}
        if not self._manages(job):
            return Verdict.allow()
        errors: list[FieldError] = []
        warnings: list[str] = []
        annotations = _annotations(job)
        min_key = c.JOB_MIN_PARALLELISM_ANNOTATION
        min_path = f"metadata.annotations[{min_key}]"
        # Checked when set or changed: kqueue itself lowers parallelism under a partial
        # admission, which must not make the (unchanged) annotation invalid.
        creating = req.operation == "CREATE" or req.old_object is None
        old = req.old_object or {}
        min_changed = creating or _annotations(old).get(min_key) != annotations.get(min_key)
        elastic = is_elastic(job, slices=self._slices)
        elastic_changed = not creating and is_elastic(old, slices=self._slices) != elastic
        if min_key in annotations and min_changed:
            try:
                min_pods_count(job, pods_count(job))
            except IntegrationError as exc:
                errors.append(FieldError(exc.path, exc.detail))
        # Either annotation may be the one added: the pair is refused whichever came last.
        if min_key in annotations and elastic and (min_changed or elastic_changed):
            errors.append(
                FieldError(
                    min_path,
                    f"partial admission ({min_key}) cannot be combined with an elastic job "
                    f'({c.ELASTIC_JOB_ANNOTATION}: "true"): remove one of the two',
                )
            )
        if elastic and self._topology:
            errors += _elastic_topology_errors(job)
        if elastic_changed:
            errors.append(
                FieldError(
                    f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]",
                    f"field is immutable: a Job is elastic or not from its creation "
                    f"(cannot change from {_annotations(old).get(c.ELASTIC_JOB_ANNOTATION)!r} "
                    f"to {annotations.get(c.ELASTIC_JOB_ANNOTATION)!r}); "
                    f"create a new Job instead",
                )
            )
        errors += scheduling_errors(job, None if creating else old)
        labels = _labels(job)
        errors += max_exec_label_errors(job, None if creating else old)
        elastic_value = annotations.get(c.ELASTIC_JOB_ANNOTATION)
        if creating and elastic_value == "true" and not self._slices:
            warnings.append(
                f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]: ignored, the Configuration's "
                "featureGates.ElasticJobsViaWorkloadSlices is false: the Job is not elastic (a "
                "change of its parallelism while it runs stops it and queues it again)"
            )
        if creating and self._slices and elastic_value is not None and elastic_value != "true":
            # Kueue reads any value but "true" as "not elastic"; so does kqueue, but a typo
            # ("True", "yes") would silently give a Job that cannot be resized.
            warnings.append(
                f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]: {elastic_value!r} is not \"true\", "
                'so the Job is not elastic (any value but "true" is read as not elastic); '
                'set it to "true" for WorkloadSlices, or remove it'
            )
        value = labels.get(c.PREEMPTIBILITY_LABEL)
        if value is not None and value not in c.PREEMPTIBILITY_LABEL_VALUES:
            warnings.append(
                f"metadata.labels[{c.PREEMPTIBILITY_LABEL}]: {value!r} is not "
                f"{c.PREEMPTIBLE_LABEL_VALUE!r} or {c.NON_PREEMPTIBLE_LABEL_VALUE!r} and is ignored"
            )
        if not creating:
            suspended = bool((old.get("spec") or {}).get("suspend")) and bool(
                (job.get("spec") or {}).get("suspend")
            )
            old_labels = _labels(old)
            for key in (c.QUEUE_NAME_LABEL, c.PRIORITY_CLASS_LABEL, c.MAX_EXEC_TIME_SECONDS_LABEL):
                if old_labels.get(key) != labels.get(key) and not suspended:
                    errors.append(
                        FieldError(
                            f"metadata.labels[{key}]",
                            f"field is immutable while the Job is not suspended: cannot change "
                            f"from {old_labels.get(key)!r} to {labels.get(key)!r}",
                        )
                    )
        if errors:
            return Verdict.deny(*errors)
        if creating:
            warnings += queue_warnings(job, self._local_queues, kind="Job")
        return Verdict.allow(*warnings)
