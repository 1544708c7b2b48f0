"""The same validation for every kind: two inputs that got through without a word.

A pod of a pod group with a ``kqueue.io/pod-group-total-count`` that is not a whole number above
0 is refused by the pod webhook (Kueue refuses it: the group could never be admitted); a Job's
``kqueue.io/elastic-job`` other than ``"true"`` is read as "not elastic", as Kueue reads it, and
the Job webhook says so; every other suspendable kind refuses the annotation whatever its value.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.job.webhook import JobWebhooks
from kqueue.controller.integrations.jobset.webhook import SUSPENDABLE as JOBSET
from kqueue.controller.integrations.mpijob.webhook import SUSPENDABLE as MPIJOB
from kqueue.controller.integrations.pod.webhook import mutate_plain_pod
from kqueue.controller.integrations.ray.webhook import RAYCLUSTER, RAYJOB
from kqueue.controller.integrations.suspension import SuspendableKind, SuspendableWebhooks
from kqueue.controller.integrations.trainjob.webhook import SUSPENDABLE as TRAINJOB
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]

TOTAL = f"metadata.annotations[{c.POD_GROUP_TOTAL_COUNT_ANNOTATION}]"
ELASTIC = f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]"


def _request(obj: Obj, kind: str) -> AdmissionRequest:
    return AdmissionRequest(
        uid="1", operation="CREATE", kind={"kind": kind}, resource={}, namespace="ns",
        name=obj["metadata"]["name"], object=obj, old_object=None,
    )


def _group_pod(total: str | None) -> Obj:
    annotations = {} if total is None else {c.POD_GROUP_TOTAL_COUNT_ANNOTATION: total}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {c.QUEUE_NAME_LABEL: "lq", c.POD_GROUP_NAME_LABEL: "g"},
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


@pytest.mark.parametrize(
    ("total", "says"),
    [
        ("abc", "must be an integer, got 'abc'"),
        ("1.5", "must be an integer, got '1.5'"),
        ("0", "greater than zero, got 0"),
        ("-2", "greater than zero, got -2"),
        (None, "required on pods of a pod group"),
    ],
)
async def test_a_pod_group_pod_with_a_bad_total_count_is_refused_naming_it(
    total: str | None, says: str
) -> None:
    verdict = await mutate_plain_pod(_request(_group_pod(total), "Pod"))
    assert not verdict.allowed and verdict.patched is None
    [error] = verdict.errors
    assert error.field == TOTAL
    assert says in error.message
    # What is allowed, so the user can fix it without reading the docs.
    assert "(allowed: the number of pods in the group, a whole number from 1" in error.message


async def test_a_pod_group_pod_with_a_good_total_count_is_held() -> None:
    verdict = await mutate_plain_pod(_request(_group_pod("3"), "Pod"))
    assert verdict.allowed and verdict.patched is not None
    assert verdict.patched["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]


def _job(elastic: str | None) -> Obj:
    annotations = {} if elastic is None else {c.ELASTIC_JOB_ANNOTATION: elastic}
    template = {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "labels": {c.QUEUE_NAME_LABEL: "lq"},
            "annotations": annotations,
        },
        "spec": {"parallelism": 2, "completions": 2, "template": template},
    }


@pytest.mark.parametrize("value", ["maybe", "True", "yes", "false", ""])
async def test_a_job_elastic_annotation_other_than_true_is_warned_about(value: str) -> None:
    verdict = await JobWebhooks().validate(_request(_job(value), "Job"))
    assert verdict.allowed
    [warning] = [w for w in verdict.warnings if c.ELASTIC_JOB_ANNOTATION in w]
    assert warning.startswith(ELASTIC)
    assert repr(value) in warning and "not elastic" in warning and '"true"' in warning


@pytest.mark.parametrize("value", ["true", None])
async def test_an_elastic_job_or_a_plain_one_gets_no_such_warning(value: str | None) -> None:
    verdict = await JobWebhooks().validate(_request(_job(value), "Job"))
    assert verdict.allowed
    assert not [w for w in verdict.warnings if c.ELASTIC_JOB_ANNOTATION in w]


@pytest.mark.parametrize(
    "spec", [JOBSET, MPIJOB, TRAINJOB, RAYJOB, RAYCLUSTER], ids=lambda s: s.kind
)
@pytest.mark.parametrize("value", ["maybe", "true"])
async def test_every_other_suspendable_kind_refuses_the_elastic_annotation(
    spec: SuspendableKind, value: str
) -> None:
    obj = {
        "kind": spec.kind,
        "metadata": {
            "name": "o",
            "namespace": "ns",
            "labels": {c.QUEUE_NAME_LABEL: "lq"},
            "annotations": {c.ELASTIC_JOB_ANNOTATION: value},
        },
        "spec": {},
    }
    verdict = await SuspendableWebhooks(spec).validate(_request(obj, spec.kind))
    assert not verdict.allowed
    assert ELASTIC in [e.field for e in verdict.errors]
