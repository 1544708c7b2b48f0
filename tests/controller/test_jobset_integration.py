"""The JobSet integration without a cluster: its Workload, its patches and its webhooks.

Kueue's cases (pkg/controller/jobs/jobset) that map onto kqueue are named as Kueue names them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.jobset import pod_set_counts, workload_for_jobset
from kqueue.api.v1alpha1 import Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.jobset.generic import JobSetIntegration
from kqueue.controller.integrations.jobset.webhook import SUSPENDABLE as JOBSET_HOOKS
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def jobset(
    *,
    replicated: tuple[tuple[str, int, int, int | None], ...] = (("leader", 1, 1, None), ("workers", 2, 3, None)),
    queue: str | None = "lq",
    suspend: bool = False,
    held: bool = False,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """``replicated``: (name, replicas, parallelism, completions)."""
    rjobs = []
    for name, replicas, parallelism, completions in replicated:
        job_spec: Obj = {
            "parallelism": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
        }
        if completions is not None:
            job_spec["completions"] = completions
        rjobs.append({"name": name, "replicas": replicas, "template": {"spec": job_spec}})
    meta: Obj = {
        "name": "js",
        "namespace": "ns",
        "uid": "js-uid",
        "resourceVersion": "5",
        "labels": {c.QUEUE_NAME_LABEL: queue} if queue else {},
        "annotations": dict(annotations or {}),
    }
    if held:
        meta["annotations"][HELD] = "true"
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": rjobs, "suspend": suspend or held},
    }


# -- the Workload ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicated", "want"),
    [
        pytest.param((("a", 1, 1, None),), {"a": 1}, id="single replicated job"),
        pytest.param((("leader", 1, 1, None), ("workers", 2, 3, None)), {"leader": 1, "workers": 6},
                     id="two replicated jobs: replicas x parallelism"),
        pytest.param((("w", 3, 4, 2),), {"w": 6}, id="completions lower than parallelism"),
        pytest.param((("w", 0, 4, None),), {"w": 0}, id="zero replicas"),
    ],
)
def test_pod_set_counts(replicated: Any, want: dict[str, int]) -> None:
    assert pod_set_counts(jobset(replicated=replicated)) == want


def test_workload_for_jobset_one_pod_set_per_replicated_job() -> None:
    wl = workload_for_jobset(jobset(), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("leader", 1), ("workers", 6)]
    assert wl.spec.queue_name == "lq"
    [owner] = wl.metadata.owner_references
    assert (owner.kind, owner.uid, owner.controller) == ("JobSet", "js-uid", True)
    assert wl.name.startswith("jobset-js-")
    # Deterministic: the same JobSet always gets the same Workload name.
    assert workload_for_jobset(jobset(), NO_CLASSES).name == wl.name


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        pytest.param(lambda js: js["spec"].pop("replicatedJobs"), "spec.replicatedJobs", id="no replicated jobs"),
        pytest.param(lambda js: js["spec"]["replicatedJobs"][1].__setitem__("replicas", -1),
                     "spec.replicatedJobs[1].replicas", id="negative replicas"),
        pytest.param(lambda js: js["spec"]["replicatedJobs"][0]["template"]["spec"].__setitem__("parallelism", "x"),
                     "spec.replicatedJobs[0].template.spec.parallelism", id="parallelism not an integer"),
        pytest.param(lambda js: js["spec"]["replicatedJobs"][1]["template"]["spec"].pop("template"),
                     "spec.replicatedJobs[1].template.spec.template.spec", id="no pod template"),
    ],
)
def test_bad_jobsets_are_refused_naming_the_field(mutate: Any, path: str) -> None:
    js = jobset()
    mutate(js)
    with pytest.raises(IntegrationError) as info:
        workload_for_jobset(js, NO_CLASSES)
    assert info.value.path == path


# -- start, stop, hold -------------------------------------------------------------------------------


def _admitted(js: Obj) -> Workload:
    doc = workload_for_jobset(js, NO_CLASSES).to_dict()
    doc["status"] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "leader", "flavors": {"cpu": "od"}, "resourceUsage": {"cpu": "1"}, "count": 1},
                {"name": "workers", "flavors": {"cpu": "spot"}, "resourceUsage": {"cpu": "6"}, "count": 6},
            ],
        }
    }
    wl = parse_object(doc, validate=False)
    assert isinstance(wl, Workload)
    return wl


RELEASES = {
    "leader": PodSetRelease("leader", 1, {"type": "od"}),
    "workers": PodSetRelease("workers", 6, {"type": "spot"}, ({"key": "spot", "operator": "Exists"},)),
}


def test_resume_writes_each_pod_set_s_flavor_into_its_replicated_job() -> None:
    js = jobset(held=True)
    patch = JobSetIntegration().run_patch(js, _admitted(js), RELEASES)

    assert patch is not None
    assert patch["metadata"] == {"annotations": {HELD: None}}
    assert patch["spec"]["suspend"] is False
    leader, workers = patch["spec"]["replicatedJobs"]
    leader_pod = leader["template"]["spec"]["template"]["spec"]
    workers_pod = workers["template"]["spec"]["template"]["spec"]
    assert leader_pod["nodeSelector"] == {"type": "od"} and "tolerations" not in leader_pod
    assert workers_pod["nodeSelector"] == {"type": "spot"}
    assert workers_pod["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    # The rest of each replicated Job is sent unchanged (a merge patch replaces a list whole).
    assert workers["replicas"] == 2 and workers["template"]["spec"]["parallelism"] == 3


def test_a_stopped_jobset_gets_its_recorded_templates_back() -> None:
    original = jobset(held=True)
    wl = workload_for_jobset(original, NO_CLASSES)
    ran = copy.deepcopy(original)
    ran["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"type": "spot"}
    patch = JobSetIntegration().hold_patch(ran, wl)

    assert patch is not None
    _, workers = patch["spec"]["replicatedJobs"]
    pod = workers["template"]["spec"]["template"]
    assert not pod["spec"].get("nodeSelector")  # removed (nulls are dropped inside a list)
    assert {"name": c.ADMISSION_GATE} in pod["spec"]["schedulingGates"]
    assert pod["metadata"]["labels"][c.MANAGED_LABEL] == "true"
    assert patch["metadata"]["resourceVersion"] == "5"


def test_user_suspended_and_pods() -> None:
    integration = JobSetIntegration()
    assert integration.user_suspended(jobset(suspend=True))
    assert not integration.user_suspended(jobset(held=True))
    pod = {
        "metadata": {
            "namespace": "ns",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "js",
                "jobset.sigs.k8s.io/jobset-uid": "js-uid",
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
            },
            "ownerReferences": [{"kind": "Job", "name": "js-workers-0", "uid": "j", "controller": True}],
        }
    }
    assert integration.owner_of_pod(pod) == "ns/js"
    assert integration.pod_set_of(jobset(), pod) == "workers"
    assert integration.owner_of_pod({"metadata": {"namespace": "ns"}}) is None


def test_finished() -> None:
    js = jobset()
    js["status"] = {"conditions": [{"type": "Completed", "status": "True", "message": "jobset completed"}]}
    assert JobSetIntegration().finished(js) == (c.FINISHED_SUCCEEDED, "jobset completed")
    js["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs"}]}
    assert JobSetIntegration().finished(js) == (c.FINISHED_FAILED, "FailedJobs")


# -- webhooks -----------------------------------------------------------------------------------------


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
        resource={"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"},
        namespace="ns",
        name="js",
        object=new,
        old_object=old,
    )


async def test_a_new_jobset_is_suspended_and_every_template_gated() -> None:
    verdict = await SuspendableWebhooks(JOBSET_HOOKS).mutate(_request(jobset()))
    out = verdict.patched
    assert out is not None
    assert out["spec"]["suspend"] is True and out["metadata"]["annotations"][HELD] == "true"
    for rjob in out["spec"]["replicatedJobs"]:
        template = rjob["template"]["spec"]["template"]
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["metadata"]["labels"][c.MANAGED_LABEL] == "true"


async def test_a_jobset_without_a_queue_is_left_alone() -> None:
    assert (await SuspendableWebhooks(JOBSET_HOOKS).mutate(_request(jobset(queue=None)))).patched is None


async def test_resuming_a_queued_jobset_keeps_it_queued() -> None:
    old = jobset(held=True)
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    verdict = await SuspendableWebhooks(JOBSET_HOOKS).mutate(_request(new, old))
    assert verdict.patched is not None and verdict.patched["spec"]["suspend"] is True
    assert any("holds this JobSet suspended" in w for w in verdict.warnings)


@pytest.mark.parametrize(
    "annotation", [c.ELASTIC_JOB_ANNOTATION, c.JOB_MIN_PARALLELISM_ANNOTATION], ids=["elastic", "partial"]
)
async def test_annotations_a_jobset_cannot_honour_are_refused(annotation: str) -> None:
    verdict = await SuspendableWebhooks(JOBSET_HOOKS).validate(_request(jobset(annotations={annotation: "true"})))
    assert not verdict.allowed
    [error] = verdict.errors
    assert error.field == f"metadata.annotations[{annotation}]"


def test_registered_and_opt_in() -> None:
    fw = registry.get("jobset.x-k8s.io/jobset")
    assert fw.kind == "JobSet" and fw.suspendable and not fw.default_enabled
    assert {w.name for w in fw.webhooks} == {"mjobset.kqueue.io", "vjobset.kqueue.io"}
