"""Mutating webhook for Pods kqueue manages: every one is born behind the admission gate.

Its webhook configuration selects pods labelled ``kqueue.io/managed: "true"`` (the Job webhook
puts that label in the pod template), so other pods never reach it. A managed pod created
without the gate (a template made before kqueue was installed, or a pod created directly) gets
it here; the job reconciler releases pods whose workload is admitted.

With gang scheduling on (:mod:`kqueue.controller.gang`) a pod that belongs to a kqueue workload
also gets ``spec.schedulingGroup.podGroupName``: the field is immutable, so it can only be set
at creation, before kqueue knows how many pods will be admitted. The group is named after the
object that owns the workload (the top-level one, not a child Job; with its UID),
so every pod of one workload, whatever its pod set, names
the same PodGroup. A managed pod that arrives with
its own group is refused: kqueue would release it into a group whose minCount nobody keeps in
step with the admission. The one exception is a group made by the pod's own Job controller
(``Job.spec.scheduling`` with the ``WorkloadWithJob`` gate; the group's controller is the pod's
Job, read through ``read_group``): that controller keeps ``minCount`` equal to the Job's
parallelism, which kqueue sets to the admitted count, so kqueue makes no second group. A pod annotated ``kqueue.io/gang-scheduling: "false"`` gets no group
(the Job webhook puts that on Jobs that run in waves).

The ``identity`` resolver completes the name: the object's UID when the pod does not carry it
(pods of some top-level kinds are owned by child Jobs, some by the object itself, so without it
one workload's pods would name two groups), and for a resizable object (an
elastic Job, a StatefulSet) its generation when the pod is created, so the pods an elastic
scale-up adds name a new group that kube-scheduler places all or nothing, while the running
gang keeps its own (see :mod:`kqueue.controller.gang`).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gang import SCHEDULING_GROUP_FIELD, group_name, job_owns_group, opted_out
from kqueue.controller.gate import add_gate
from kqueue.controller.kube import KubeError
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict
from kqueue.controller.webhooks.shape import request_shape_errors

MUTATE_PATH = "/mutate--v1-pod"

Obj = dict[str, Any]
Handler = Callable[[AdmissionRequest], Any]
# (kind, name, uid if known) of the object whose workload a pod belongs to, or None.
Claimant = Callable[[Obj], tuple[str, str, str | None] | None]
# (kind, namespace, name, uid if the pod carries it) -> the object's (uid, size epoch): the UID
# when the pod does not carry it (its direct controller is a child object), the epoch
# (``g<generation>``) if the object is resizable.
Identity = Callable[[str, str, str, str | None], Awaitable[tuple[str | None, str | None]]]


def _no_claimant(_pod: Obj) -> tuple[str, str, str | None] | None:
    return None


async def no_group(_namespace: str, _name: str) -> Obj | None:
    return None


async def as_claimed(
    _kind: str, _namespace: str, _name: str, uid: str | None
) -> tuple[str | None, str | None]:
    return uid, None


def pod_mutator(
    gang: Callable[[], bool] = lambda: False,
    claimant: Claimant = _no_claimant,
    identity: Identity = as_claimed,
    read_group: Callable[[str, str], Awaitable[Obj | None]] = no_group,
) -> Handler:
    """The pod webhook; ``gang`` says whether the cluster's gang scheduling is in use now."""

    async def mutate(req: AdmissionRequest) -> Verdict:
        if errors := request_shape_errors(req.object, req.old_object, "Pod"):
            return Verdict.deny(*errors)
        pod = req.object or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if req.operation != "CREATE" or labels.get(c.MANAGED_LABEL) != "true":
            return Verdict.allow()
        claimed = claimant(pod)
        given = (pod.get("spec") or {}).get("schedulingGroup")
        want: str | None = None
        namespace = str((pod.get("metadata") or {}).get("namespace") or req.namespace or "")
        if given is not None and claimed is not None and claimed[0] == "Job":
            try:
                group = await read_group(namespace, str(given.get("podGroupName") or ""))
            except KubeError:
                group = None  # not known to be the Job's: refused below, its controller retries
            if group is not None and job_owns_group(group, pod):
                # The pod's Job controller made its group (see the module doc): kept as given.
                out = copy.deepcopy(pod)
                changed = add_gate(out.setdefault("spec", {}))
                return Verdict.patch(out) if changed else Verdict.allow()
        if gang() and claimed is not None and not opted_out(pod):
            kind, name, uid = claimed
            try:
                uid, size = await identity(kind, namespace, name, uid)
            except KubeError as exc:
                # Without the size the pod could join the wrong gang; its controller retries.
                return Verdict.deny(
                    FieldError(
                        SCHEDULING_GROUP_FIELD,
                        f"cannot be chosen: reading {kind} {namespace}/{name} (its UID and "
                        f"size pick the pod's PodGroup) failed: {exc}",
                    )
                )
            want = group_name(kind, name, uid, size)
        # Reinvoked after another webhook: our own group is already there, and stays.
        if given is not None and (want is None or given != {"podGroupName": want}):
            return Verdict.deny(
                FieldError(
                    SCHEDULING_GROUP_FIELD,
                    f"must not be set on a pod kqueue manages (label {c.MANAGED_LABEL}=true; "
                    f"got {given!r}): kqueue sets it itself when the cluster serves gang "
                    "scheduling, naming the PodGroup it sizes to the admitted pods; remove "
                    "spec.schedulingGroup",
                )
            )
        out = copy.deepcopy(pod)
        spec = out.setdefault("spec", {})
        changed = add_gate(spec)
        if want is not None and given is None:
            spec["schedulingGroup"] = {"podGroupName": want}
            changed = True
        return Verdict.patch(out) if changed else Verdict.allow()

    return mutate


mutate_pod = pod_mutator()
