"""Which Jobs and Pods kqueue manages (kqueue.api.integrations.management.manages).

One table of named cases; each also checks that the controller's own decision today
(``JobReconciler._manages`` for Jobs: the queue label or ``Management.manages_unlabelled``;
``is_plain`` plus the pod webhook's namespace selector for Pods) agrees, so simulate and the
controller cannot drift apart unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.api.config import Configuration, LabelSelector, parse_configuration
from kqueue.api.integrations import queue_name
from kqueue.api.integrations.management import (
    ManagementPolicy,
    kueue_key_warnings,
    kueue_keys,
    manages,
    namespace_labels_of,
)
from kqueue.controller.integrations.management import Management as ControllerManagement
from kqueue.controller.integrations.pod.generic import is_plain

Obj = dict[str, Any]


def job(ns: str = "default", labels: dict[str, str] | None = None, **meta: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": ns, "labels": labels or {}, **meta},
        "spec": {"template": {"spec": {"containers": []}}},
    }


def pod(ns: str = "default", labels: dict[str, str] | None = None, **meta: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns, "labels": labels or {}, **meta},
        "spec": {"containers": []},
    }


KQ = {"kqueue.io/queue-name": "user-queue"}
KUEUE = {"kueue.x-k8s.io/queue-name": "user-queue"}
OWNED_BY_JOB = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]
NOT_CONTROLLER = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u"}]
WITHOUT_QUEUE_NAME = ManagementPolicy(manage_jobs_without_queue_name=True)
ONLY_TEAMS = ManagementPolicy(
    manage_jobs_without_queue_name=True,
    namespace_selector=LabelSelector.model_validate({"matchLabels": {"kind": "team"}}),
)


@dataclass(frozen=True)
class Case:
    obj: Obj
    want_managed: bool
    policy: ManagementPolicy = field(default_factory=ManagementPolicy)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    # Words the reason must contain (what to do, the label it carries...).
    want_reason: tuple[str, ...] = ()


CASES = {
    # --- Jobs
    "job with kqueue's queue label": Case(job(labels=KQ), True, want_reason=("user-queue",)),
    "job with only Kueue's queue label": Case(
        job(labels=KUEUE),
        False,
        want_reason=("kueue.x-k8s.io/queue-name=user-queue", "kqueue.io/queue-name=user-queue",
                     "kqueue convert"),
    ),
    "job without any label": Case(
        job(), False, want_reason=("manageJobsWithoutQueueName is off", "kqueue.io/queue-name=")
    ),
    "job with an empty queue label": Case(job(labels={"kqueue.io/queue-name": ""}), False),
    "labelled job in kube-system (weak namespace exemption)": Case(
        job("kube-system", labels=KQ), True
    ),
    "unlabelled job, manageJobsWithoutQueueName": Case(job(), True, WITHOUT_QUEUE_NAME),
    "unlabelled job in kube-system, manageJobsWithoutQueueName": Case(
        job("kube-system"), False, WITHOUT_QUEUE_NAME,
        want_reason=("managedJobsNamespaceSelector",),
    ),
    "unlabelled job in kqueue-system, manageJobsWithoutQueueName": Case(
        job("kqueue-system"), False, WITHOUT_QUEUE_NAME
    ),
    "unlabelled job in a selected namespace": Case(
        job("a"), True, ONLY_TEAMS, namespace_labels={"kind": "team"}
    ),
    "unlabelled job in a namespace the selector leaves out": Case(
        job("a"), False, ONLY_TEAMS, namespace_labels={"kind": "system"}
    ),
    "unlabelled job with Kueue's label, manageJobsWithoutQueueName off": Case(
        job(labels=KUEUE), False, want_reason=("kueue.x-k8s.io/queue-name",)
    ),
    "labelled job, batch/job integration disabled": Case(
        job(labels=KQ),
        False,
        ManagementPolicy(frameworks=frozenset({"pod"})),
        want_reason=("batch/job", "integrations.frameworks"),
    ),
    # --- Pods
    "plain pod with kqueue's queue label": Case(pod(labels=KQ), True),
    "plain pod with only Kueue's queue label": Case(
        pod(labels=KUEUE), False, want_reason=("kqueue.io/queue-name=user-queue", "kqueue convert")
    ),
    "pod without a label, manageJobsWithoutQueueName": Case(pod(), False, WITHOUT_QUEUE_NAME),
    "labelled pod controlled by a Job": Case(
        pod(labels=KQ, ownerReferences=OWNED_BY_JOB), False, want_reason=("controlled by Job j",)
    ),
    "labelled pod with a non-controller owner": Case(
        pod(labels=KQ, ownerReferences=NOT_CONTROLLER), True
    ),
    "labelled pod in kube-system (strong namespace exemption)": Case(
        pod("kube-system", labels=KQ), False, want_reason=("managedJobsNamespaceSelector",)
    ),
    "labelled pod in a namespace the selector leaves out": Case(
        pod("a", labels=KQ), False, ONLY_TEAMS, namespace_labels={"kind": "system"}
    ),
    "labelled pod, pod integration disabled": Case(
        pod(labels=KQ), False, ManagementPolicy(frameworks=frozenset({"batch/job"}))
    ),
    # --- other kinds
    "a JobSet, its integration off (the default)": Case(
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
         "metadata": {"name": "js", "labels": KQ}},
        False,
        want_reason=("jobset.x-k8s.io/jobset integration is not enabled",),
    ),
    "a Deployment, its integration off (the default)": Case(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": KQ}},
        False,
        want_reason=("deployment integration is not enabled",),
    ),
}


def _controller_decision(case: Case) -> bool | None:
    """What the controller decides today, for the kinds and settings it implements."""
    obj = case.obj
    ns = obj["metadata"].get("namespace") or "default"
    labels = namespace_labels_of(ns, {ns: case.namespace_labels})
    if obj["kind"] == "Job":
        if "batch/job" not in case.policy.frameworks:
            return False  # no informer, no webhook for the kind
        mgmt = ControllerManagement(
            without_queue_name=case.policy.manage_jobs_without_queue_name,
            namespace_selector=case.policy.namespace_selector,
        )
        return queue_name(obj) is not None or mgmt.manages_unlabelled(labels)
    if obj["kind"] == "Pod":
        if "pod" not in case.policy.frameworks:
            return False
        selector = case.policy.namespace_selector
        return is_plain(obj) and (selector is None or selector.matches(labels))
    return None


@pytest.mark.parametrize("name", list(CASES))
def test_manages(name: str) -> None:
    case = CASES[name]
    got = manages(case.obj, namespace_labels=case.namespace_labels, policy=case.policy)
    assert got.managed is case.want_managed, got.reason
    assert bool(got) is case.want_managed
    for words in case.want_reason:
        assert words in got.reason, got.reason
    controller = _controller_decision(case)
    if controller is not None:
        assert got.managed is controller, "simulate and the controller disagree"


def test_policy_from_configuration() -> None:
    config = parse_configuration(
        {
            "apiVersion": "config.kqueue.io/v1alpha1",
            "kind": "Configuration",
            "namespace": "queues",
            "manageJobsWithoutQueueName": True,
            "integrations": {"frameworks": ["batch/job"]},
        }
    )
    policy = ManagementPolicy.from_config(config)
    assert policy.manage_jobs_without_queue_name
    assert policy.frameworks == frozenset({"batch/job"})
    # The default selector leaves out kube-system and the configured namespace.
    assert not manages(job("queues"), policy=policy)
    assert manages(job("team"), policy=policy)
    assert ManagementPolicy.from_config(Configuration()) == ManagementPolicy()


def test_kueue_keys_on_a_managed_job() -> None:
    obj = job(
        labels={**KQ, "kueue.x-k8s.io/priority-class": "high", "kueue.x-k8s.io/managed": "true"},
        annotations={"kueue.x-k8s.io/job-min-parallelism": "1"},
    )
    obj["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}
    }
    assert kueue_keys(obj) == [
        ("metadata.labels[kueue.x-k8s.io/priority-class]", "kqueue.io/priority-class"),
        ("metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
         "kqueue.io/job-min-parallelism"),
        ("spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]",
         "kqueue.io/podset-required-topology"),
    ]
    [first, *_] = kueue_key_warnings(obj)
    assert "use kqueue.io/priority-class" in first and "kqueue convert" in first
