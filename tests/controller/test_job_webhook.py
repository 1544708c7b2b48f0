"""The Job validating webhook on UPDATE: partial admission and elastic Jobs never meet, and a Job
does not switch between elastic and not (Kueue's rule), whatever order the annotations come in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.job.webhook import JobWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]

MIN = c.JOB_MIN_PARALLELISM_ANNOTATION
ELASTIC = c.ELASTIC_JOB_ANNOTATION
MIN_PATH = f"metadata.annotations[{MIN}]"
ELASTIC_PATH = f"metadata.annotations[{ELASTIC}]"


def _job(annotations: dict[str, str], *, suspend: bool = False, parallelism: int = 3) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "labels": {c.QUEUE_NAME_LABEL: "q"},
            "annotations": dict(annotations),
        },
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "suspend": suspend,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def _request(new: Obj, old: Obj | None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "batch", "version": "v1", "kind": "Job"},
        resource={"group": "batch", "version": "v1", "resource": "jobs"},
        namespace="ns",
        name="j",
        object=new,
        old_object=old,
    )


async def _errors(new: Obj, old: Obj | None) -> dict[str, str]:
    verdict = await JobWebhooks().validate(_request(new, old))
    return {e.field: e.message for e in verdict.errors}


async def test_adding_elastic_to_a_job_with_min_parallelism_is_refused_naming_both() -> None:
    old = _job({MIN: "1"})
    errors = await _errors(_job({MIN: "1", ELASTIC: "true"}), old)
    assert MIN in errors[MIN_PATH] and ELASTIC in errors[MIN_PATH]
    assert "cannot be combined" in errors[MIN_PATH]
    # The same message as at creation.
    created = await _errors(_job({MIN: "1", ELASTIC: "true"}), None)
    assert created[MIN_PATH] == errors[MIN_PATH]


async def test_adding_min_parallelism_to_an_elastic_job_is_refused() -> None:
    errors = await _errors(_job({MIN: "2", ELASTIC: "true"}), _job({ELASTIC: "true"}))
    assert set(errors) == {MIN_PATH}
    assert ELASTIC in errors[MIN_PATH]


@pytest.mark.parametrize("suspend", [False, True], ids=["running", "suspended"])
@pytest.mark.parametrize(
    ("before", "after"),
    [({}, {ELASTIC: "true"}), ({ELASTIC: "true"}, {}), ({ELASTIC: "true"}, {ELASTIC: "false"})],
    ids=["add", "remove", "turn-off"],
)
async def test_the_elastic_annotation_is_immutable(
    before: dict[str, str], after: dict[str, str], suspend: bool
) -> None:
    # Kueue refuses the switch whether or not the Job is suspended: the Workload's name
    # depends on it, so a switch would give the Job a second Workload.
    errors = await _errors(_job(after, suspend=suspend), _job(before, suspend=suspend))
    assert set(errors) == {ELASTIC_PATH}
    assert "immutable" in errors[ELASTIC_PATH]


async def test_unrelated_updates_of_an_elastic_or_partial_job_pass() -> None:
    elastic = _job({ELASTIC: "true"})
    scaled = copy.deepcopy(elastic)
    scaled["spec"]["parallelism"] = 5
    assert await _errors(scaled, elastic) == {}
    partial = _job({MIN: "1"})
    # kqueue lowers parallelism under a partial admission: the unchanged annotation stays valid.
    lowered = _job({MIN: "1"}, parallelism=1)
    assert await _errors(lowered, partial) == {}
    # A value other than "true" is not elastic: going from absent to "false" changes nothing.
    assert await _errors(_job({ELASTIC: "false"}), _job({})) == {}


# -- suspended while queued (mutating) ------------------------------------------------------------

HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def _held(job: Obj) -> Obj:
    out = copy.deepcopy(job)
    out["spec"]["suspend"] = True
    out["metadata"]["annotations"][HELD] = "true"
    return out


async def test_a_job_created_running_is_suspended_as_kqueue_s_and_gated() -> None:
    verdict = await JobWebhooks().mutate(_request(_job({}), None))

    out = verdict.patched
    assert out is not None
    assert out["spec"]["suspend"] is True
    assert out["metadata"]["annotations"] == {HELD: "true"}
    assert {"name": c.ADMISSION_GATE} in out["spec"]["template"]["spec"]["schedulingGates"]


async def test_a_job_created_suspended_stays_its_user_s() -> None:
    verdict = await JobWebhooks().mutate(_request(_job({}, suspend=True), None))

    out = verdict.patched
    assert out is not None  # gated all the same
    assert out["spec"]["suspend"] is True
    assert HELD not in out["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("old", "new", "held"),
    [
        pytest.param(_held(_job({})), _held(_job({})) | {"spec": {**_job({})["spec"], "suspend": False}},
                     True, id="user-resumes-a-queued-job"),
        pytest.param(_job({}, suspend=True), _job({}), True, id="user-resumes-their-own-job"),
        pytest.param(_held(_job({})), _job({}), False, id="kqueue-resumes-on-admission"),
        pytest.param(_job({}), _job({}), False, id="unrelated-update"),
    ],
)
async def test_only_kqueue_resumes_a_queued_job(old: Obj, new: Obj, held: bool) -> None:
    verdict = await JobWebhooks().mutate(_request(new, old))

    assert verdict.allowed
    if held:
        assert verdict.patched is not None
        assert verdict.patched["spec"]["suspend"] is True
        assert verdict.patched["metadata"]["annotations"][HELD] == "true"
        assert any("holds this Job suspended" in w for w in verdict.warnings)
    else:
        assert verdict.patched is None


async def test_a_started_job_being_reset_is_not_taken_for_a_resume() -> None:
    old = _job({}, suspend=True)
    old["status"] = {"startTime": "2025-03-01T11:00:00Z"}
    verdict = await JobWebhooks().mutate(_request(_job({}), old))
    assert verdict.patched is None


# -- admission warnings ------------------------------------------------------------------------


def _queues(names: dict[str, list[str]]) -> Any:
    return lambda namespace: names.get(namespace, [])


@pytest.mark.parametrize(
    ("queue", "known", "want"),
    [
        pytest.param("q", ["q"], [], id="the LocalQueue exists"),
        pytest.param("user-qeue", ["user-queue", "other"], ['did you mean "user-queue"?'], id="a typo"),
        pytest.param("zzz", ["user-queue"], ["does not exist in namespace ns"], id="nothing close"),
    ],
)
async def test_a_job_naming_a_missing_local_queue_gets_a_warning(
    queue: str, known: list[str], want: list[str]
) -> None:
    job = _job({})
    job["metadata"]["labels"][c.QUEUE_NAME_LABEL] = queue
    verdict = await JobWebhooks(local_queues=_queues({"ns": known})).validate(_request(job, None))
    assert verdict.allowed
    if not want:
        assert verdict.warnings == ()
    else:
        [warning] = verdict.warnings
        assert warning.startswith(f"metadata.labels[{c.QUEUE_NAME_LABEL}]: LocalQueue {queue!r}")
        assert all(w in warning for w in want)
        if "did you mean" not in want[0]:
            assert "did you mean" not in warning


async def test_no_queue_warning_while_the_cache_is_not_synced() -> None:
    verdict = await JobWebhooks(local_queues=lambda _ns: None).validate(_request(_job({}), None))
    assert verdict.warnings == ()


async def test_leftover_kueue_labels_get_a_warning() -> None:
    job = _job({})
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    verdict = await JobWebhooks(local_queues=_queues({"ns": ["q"]})).validate(_request(job, None))
    [warning] = verdict.warnings
    assert "metadata.labels[kueue.x-k8s.io/priority-class]" in warning
    assert "use kqueue.io/priority-class" in warning


@pytest.mark.parametrize(("value", "ok"), [("600", True), ("0", False), ("1h", False)])
async def test_the_max_exec_time_label_is_checked_at_creation(value: str, ok: bool) -> None:
    job = _job({})
    job["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = value
    verdict = await JobWebhooks().validate(_request(job, None))
    assert verdict.allowed == ok
    if not ok:
        assert [e.field for e in verdict.errors] == [f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]"]


async def test_the_max_exec_time_label_is_immutable_while_the_job_runs() -> None:
    old = _job({})
    new = copy.deepcopy(old)
    new["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = "60"
    verdict = await JobWebhooks().validate(_request(new, old))
    assert f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]" in [e.field for e in verdict.errors]
    held_old, held_new = _held(old), _held(new)
    assert (await JobWebhooks().validate(_request(held_new, held_old))).allowed


async def test_a_job_controlled_by_another_integration_s_object_is_left_alone() -> None:
    job = _job({})
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": "u",
         "controller": True}
    ]
    hooks = JobWebhooks(
        manage_jobs_without_queue_name=True, parent_kinds=frozenset({("kubeflow.org/v2beta1", "MPIJob")})
    )
    assert (await hooks.mutate(_request(job, None))).patched is None
    # Without that integration enabled it is an ordinary Job.
    alone = JobWebhooks(manage_jobs_without_queue_name=True)
    assert (await alone.mutate(_request(job, None))).patched is not None
