"""Job and Pod -> Workload: Kueue's job framework rules, one test per rule."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from kqueue.api.integrations import (
    IntegrationError,
    PriorityClasses,
    is_managed,
    preemptibility_labels,
    role_hash,
    workload_for_job,
    workload_for_pod,
    workload_for_pod_group,
    workload_name,
)
from kqueue.api.v1alpha1 import WorkloadPriorityClass, parse_object

PRIORITIES = PriorityClasses(workload={"high": 1000, "low": 10, "top": 5000}, pod={"pod-high": 500})


def make_job(
    name: str = "sample",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    parallelism: int | None = 3,
    completions: int | None = None,
    cpu: str = "1",
    priority_class_name: str | None = None,
    template_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"creationTimestamp": None, "labels": template_labels or {}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        }
    }
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    if priority_class_name is not None:
        spec["template"]["spec"]["priorityClassName"] = priority_class_name
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": "0b5e3f2c-uid",
            "labels": {"kqueue.io/queue-name": "lq", **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def make_pod(
    name: str,
    *,
    cpu: str = "1",
    group: str | None = None,
    total: int | None = None,
    labels: dict[str, str] | None = None,
    phase: str | None = None,
    created: str = "2024-01-01T00:00:00Z",
) -> dict[str, Any]:
    all_labels = {"kqueue.io/queue-name": "lq", **(labels or {})}
    annotations: dict[str, str] = {}
    if group is not None:
        all_labels["kqueue.io/pod-group-name"] = group
    if total is not None:
        annotations["kqueue.io/pod-group-total-count"] = str(total)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": all_labels,
            "annotations": annotations,
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ]
        },
    }
    if phase is not None:
        pod["status"] = {"phase": phase}
    return pod


# --- names ----------------------------------------------------------------------------------


def _kueue_hash(*parts: str) -> str:
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:5]


def test_workload_name_is_kueues_kind_name_hash() -> None:
    assert workload_name("owner", "uid", "kind", "group") == "kind-owner-" + _kueue_hash(
        "kind", "group", "owner", "uid"
    )


def test_workload_name_truncates_prefix_but_hashes_full_name() -> None:
    long = "a" * 300
    name = workload_name(long, "uid", "Job", "batch")
    assert len(name) == 253
    assert name == ("job-" + long)[:247] + "-" + _kueue_hash("Job", "batch", long, "uid")


def test_job_workload_name_deterministic_and_uid_sensitive() -> None:
    a = workload_for_job(make_job(), PRIORITIES)
    b = workload_for_job(make_job(), PRIORITIES)
    other = make_job()
    other["metadata"]["uid"] = "different"
    assert a.name == b.name == "job-sample-" + _kueue_hash("Job", "batch", "sample", "0b5e3f2c-uid")
    assert workload_for_job(other, PRIORITIES).name != a.name


def test_elastic_job_slice_name_includes_generation() -> None:
    job = make_job(annotations={"kqueue.io/elastic-job": "true"})
    job["metadata"]["generation"] = 2
    wl = workload_for_job(job, PRIORITIES)
    assert wl.name == "job-sample-" + _kueue_hash("Job", "batch", "sample", "0b5e3f2c-uid", "2")
    assert wl.metadata.annotations == {"kqueue.io/elastic-job": "true"}
    job["metadata"]["generation"] = 3
    assert workload_for_job(job, PRIORITIES).name != wl.name


# --- jobs -----------------------------------------------------------------------------------


def test_job_workload_shape() -> None:
    wl = workload_for_job(make_job(), PRIORITIES)
    assert wl.namespace == "team-a"
    assert wl.spec.queue_name == "lq"
    [ps] = wl.spec.pod_sets
    assert (ps.name, ps.count, ps.min_count) == ("main", 3, None)
    assert ps.pod_requests() == {"cpu": 1000}
    [owner] = wl.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
        "batch/v1",
        "Job",
        "sample",
        "0b5e3f2c-uid",
    )
    assert owner.controller is True and owner.block_owner_deletion is True
    assert wl.spec.priority == 0 and wl.spec.priority_class_ref is None
    # The result is a valid kqueue Workload, round-trippable through the API model.
    assert parse_object(wl.to_dict()).to_dict() == wl.to_dict()


def test_job_template_is_copied_not_shared() -> None:
    job = make_job(template_labels={"app": "x"})
    wl = workload_for_job(job, PRIORITIES)
    job["spec"]["template"]["metadata"]["labels"]["app"] = "changed"
    assert wl.spec.pod_sets[0].template.metadata.labels == {"app": "x"}
    assert "creationTimestamp" not in wl.to_dict()["spec"]["podSets"][0]["template"]["metadata"]


@pytest.mark.parametrize(
    ("parallelism", "completions", "want"),
    [(3, None, 3), (None, None, 1), (5, 2, 2), (2, 5, 2), (0, None, 0)],
)
def test_job_count_is_parallelism_capped_by_completions(
    parallelism: int | None, completions: int | None, want: int
) -> None:
    wl = workload_for_job(make_job(parallelism=parallelism, completions=completions), PRIORITIES)
    assert wl.spec.pod_sets[0].count == want


def test_job_min_parallelism_becomes_min_count() -> None:
    job = make_job(annotations={"kqueue.io/job-min-parallelism": "2"})
    assert workload_for_job(job, PRIORITIES).spec.pod_sets[0].min_count == 2


@pytest.mark.parametrize("value", ["0", "3", "4", "x", "-1"])
def test_job_min_parallelism_must_be_between_zero_and_count(value: str) -> None:
    job = make_job(annotations={"kqueue.io/job-min-parallelism": value})
    with pytest.raises(IntegrationError) as exc:
        workload_for_job(job, PRIORITIES)
    assert exc.value.path == "metadata.annotations[kqueue.io/job-min-parallelism]"


def test_job_priority_from_workload_priority_class_label_wins() -> None:
    job = make_job(labels={"kqueue.io/priority-class": "high"}, priority_class_name="pod-high")
    wl = workload_for_job(job, PRIORITIES)
    assert wl.spec.priority == 1000
    assert wl.spec.priority_class_ref is not None
    assert (wl.spec.priority_class_ref.group, wl.spec.priority_class_ref.kind) == (
        "kqueue.io",
        "WorkloadPriorityClass",
    )


def test_job_priority_from_pod_priority_class() -> None:
    wl = workload_for_job(make_job(priority_class_name="pod-high"), PRIORITIES)
    assert wl.spec.priority == 500
    ref = wl.spec.priority_class_ref
    assert ref is not None and (ref.group, ref.kind, ref.name) == (
        "scheduling.k8s.io",
        "PriorityClass",
        "pod-high",
    )


def test_job_priority_from_global_default_priority_class() -> None:
    classes = PriorityClasses.from_objects(
        [],
        [
            {"metadata": {"name": "default"}, "value": 7, "globalDefault": True},
            {"metadata": {"name": "other"}, "value": 9},
        ],
    )
    wl = workload_for_job(make_job(), classes)
    assert wl.spec.priority == 7
    assert wl.spec.priority_class_ref is not None
    assert wl.spec.priority_class_ref.name == "default"


def test_priority_classes_from_models() -> None:
    wpc = WorkloadPriorityClass.model_validate(
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "w"},
            "value": 3,
        }
    )
    classes = PriorityClasses.from_objects([wpc])
    assert classes.workload_priority_class("w") == 3
    assert classes.priority_class("w") is None


@pytest.mark.parametrize(
    ("job", "path"),
    [
        (
            make_job(labels={"kqueue.io/priority-class": "missing"}),
            "metadata.labels[kqueue.io/priority-class]",
        ),
        (make_job(priority_class_name="missing"), "spec.priorityClassName"),
        (
            make_job(labels={"kqueue.io/preemption-priority-class": "missing"}),
            "metadata.labels[kqueue.io/preemption-priority-class]",
        ),
    ],
)
def test_unknown_priority_class_is_an_error(job: dict[str, Any], path: str) -> None:
    with pytest.raises(IntegrationError) as exc:
        workload_for_job(job, PRIORITIES)
    assert exc.value.path == path
    assert "not found" in str(exc.value)


def test_job_preemption_priority_class_label() -> None:
    job = make_job(
        labels={"kqueue.io/priority-class": "high", "kqueue.io/preemption-priority-class": "top"}
    )
    wl = workload_for_job(job, PRIORITIES)
    assert wl.spec.preemption_priority == 5000
    ref = wl.spec.preemption_priority_class_ref
    assert ref is not None and (ref.kind, ref.name) == ("WorkloadPriorityClass", "top")


def test_preemption_priority_below_priority_is_rejected() -> None:
    job = make_job(
        labels={"kqueue.io/priority-class": "high", "kqueue.io/preemption-priority-class": "low"}
    )
    with pytest.raises(IntegrationError, match="lower than the scheduling priority"):
        workload_for_job(job, PRIORITIES)


def test_job_preemptibility_label_is_where_the_engine_reads_the_owner_label() -> None:
    job = make_job(
        labels={"kqueue.io/preemptibility": "non-preemptible"},
        template_labels={"kqueue.io/preemptibility": "preemptible"},
    )
    wl = workload_for_job(job, PRIORITIES)
    assert wl.metadata.labels == {"kqueue.io/preemptibility": "non-preemptible"}
    owner, pod = preemptibility_labels(
        wl.metadata.labels, [ps.template.metadata.labels for ps in wl.spec.pod_sets]
    )
    assert (owner, pod) == ("non-preemptible", "preemptible")


def test_job_label_keys_to_copy() -> None:
    job = make_job(labels={"team": "a", "other": "b"})
    wl = workload_for_job(job, PRIORITIES, label_keys_to_copy=["team"])
    assert wl.metadata.labels == {"team": "a"}


def test_job_slice_replacement_annotation() -> None:
    wl = workload_for_job(make_job(), PRIORITIES, replacement_for="team-a/job-sample-aaaaa")
    assert wl.metadata.annotations == {
        "kqueue.io/workload-slice-replacement-for": "team-a/job-sample-aaaaa"
    }


def test_job_without_queue_label_is_not_managed() -> None:
    job = make_job()
    del job["metadata"]["labels"]["kqueue.io/queue-name"]
    assert not is_managed(job)
    assert workload_for_job(job, PRIORITIES).spec.queue_name is None


def test_job_invalid_template_names_the_jobs_field() -> None:
    job = make_job(cpu="lots")
    with pytest.raises(IntegrationError) as exc:
        workload_for_job(job, PRIORITIES)
    assert exc.value.path == "spec.template.spec.containers[0].resources.requests[cpu]"


def test_job_invalid_parallelism() -> None:
    job = make_job()
    job["spec"]["parallelism"] = "3"
    with pytest.raises(IntegrationError) as exc:
        workload_for_job(job, PRIORITIES)
    assert exc.value.path == "spec.parallelism"


# --- pods -----------------------------------------------------------------------------------


def test_single_pod_workload() -> None:
    pod = make_pod("p1", labels={"kqueue.io/preemptibility": "preemptible"})
    wl = workload_for_pod(pod, PRIORITIES)
    assert wl.name == "pod-p1-" + _kueue_hash("Pod", "", "p1", "uid-p1")
    [ps] = wl.spec.pod_sets
    assert (ps.name, ps.count) == ("main", 1)
    assert ps.template.metadata.labels == {"kqueue.io/preemptibility": "preemptible"}
    assert wl.metadata.labels == {"kqueue.io/preemptibility": "preemptible"}
    [owner] = wl.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.controller) == ("v1", "Pod", True)


def test_single_pod_priority_from_spec() -> None:
    pod = make_pod("p1")
    pod["spec"]["priorityClassName"] = "pod-high"
    assert workload_for_pod(pod, PRIORITIES).spec.priority == 500


def test_pod_of_a_group_is_refused_as_single() -> None:
    with pytest.raises(IntegrationError):
        workload_for_pod(make_pod("p1", group="g", total=1), PRIORITIES)


def test_pod_group_groups_pod_sets_by_shape() -> None:
    pods = [
        make_pod("driver", cpu="2", group="g", total=4),
        make_pod("w1", group="g", total=4),
        make_pod("w2", group="g", total=4),
        make_pod("w3", group="g", total=4),
    ]
    wl = workload_for_pod_group(pods, PRIORITIES)
    assert wl.name == "g"
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    assert counts == {role_hash(pods[0]): 1, role_hash(pods[1]): 3}
    assert [ps.name for ps in wl.spec.pod_sets] == sorted(counts)
    assert sorted(o.name for o in wl.metadata.owner_references) == ["driver", "w1", "w2", "w3"]
    assert all(o.controller is None for o in wl.metadata.owner_references)


def test_role_hash_matches_kueues_json_for_plain_requests() -> None:
    # Go's json.Marshal of Kueue's shape map: sorted keys, nulls for unset fields.
    want = (
        '{"spec":{"affinity":null,"containers":[{"ports":null,"resources":{"requests":'
        '{"cpu":"1"}}}],"initContainers":null,"nodeSelector":null,"overhead":null,'
        '"priority":null,"resourceClaims":null,"runtimeClassName":null,"tolerations":null,'
        '"topologySpreadConstraints":null}}'
    )
    assert role_hash(make_pod("x")) == hashlib.sha256(want.encode()).hexdigest()[:8]


def test_pod_group_ignores_failed_pods_and_drops_excess() -> None:
    pods = [
        make_pod("a", group="g", total=2, created="2024-01-01T00:00:01Z"),
        make_pod("b", group="g", total=2, phase="Failed"),
        make_pod("c", group="g", total=2, created="2024-01-01T00:00:02Z"),
        make_pod("d", group="g", total=2, created="2024-01-01T00:00:03Z"),
    ]
    wl = workload_for_pod_group(pods, PRIORITIES)
    assert [ps.count for ps in wl.spec.pod_sets] == [2]
    assert sorted(o.name for o in wl.metadata.owner_references) == ["a", "c"]


def test_pod_group_with_fewer_pods_than_total_is_an_error() -> None:
    with pytest.raises(IntegrationError, match="fewer runnable pods"):
        workload_for_pod_group([make_pod("a", group="g", total=3)], PRIORITIES)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda p: p["metadata"]["labels"].update({"kqueue.io/queue-name": "other"}),
            "metadata.labels[kqueue.io/queue-name]",
        ),
        (
            lambda p: p["metadata"]["annotations"].update({"kqueue.io/pod-group-total-count": "3"}),
            "metadata.annotations[kqueue.io/pod-group-total-count]",
        ),
        (
            lambda p: p["metadata"]["labels"].update({"kqueue.io/preemptibility": "x"}),
            "metadata.labels[kqueue.io/preemptibility]",
        ),
    ],
)
def test_pod_group_members_must_agree(mutate: Any, path: str) -> None:
    pods = [make_pod("a", group="g", total=2), make_pod("b", group="g", total=2)]
    pods[0]["metadata"]["labels"]["kqueue.io/preemptibility"] = "preemptible"
    odd = copy.deepcopy(pods[1])
    mutate(odd)
    with pytest.raises(IntegrationError) as exc:
        workload_for_pod_group([pods[0], odd], PRIORITIES)
    assert exc.value.path == path


def test_pod_group_more_than_eight_roles() -> None:
    pods = [make_pod(f"p{i}", cpu=str(i + 1), group="g", total=9) for i in range(9)]
    with pytest.raises(IntegrationError, match="more than 8 roles"):
        workload_for_pod_group(pods, PRIORITIES)


def test_pod_group_total_count_annotation_required_and_positive() -> None:
    with pytest.raises(IntegrationError) as exc:
        workload_for_pod_group([make_pod("a", group="g")], PRIORITIES)
    assert exc.value.path == "metadata.annotations[kqueue.io/pod-group-total-count]"
    with pytest.raises(IntegrationError, match="greater than zero"):
        workload_for_pod_group([make_pod("a", group="g", total=0)], PRIORITIES)


# --- maximum execution time (kqueue.io/max-exec-time-seconds) -------------------------------

MAX_EXEC = "kqueue.io/max-exec-time-seconds"
MAX_EXEC_PATH = f"metadata.labels[{MAX_EXEC}]"


def test_the_maximum_execution_time_is_passed_to_the_created_workload() -> None:
    """Kueue's job controller case "the maximum execution time is passed to the created
    workload": the Job's label becomes the Workload's spec field."""
    wl = workload_for_job(make_job(labels={MAX_EXEC: "10"}), PRIORITIES)
    assert wl.spec.maximum_execution_time_seconds == 10
    assert wl.to_dict()["spec"]["maximumExecutionTimeSeconds"] == 10


def test_without_the_label_there_is_no_maximum_execution_time() -> None:
    wl = workload_for_job(make_job(), PRIORITIES)
    assert wl.spec.maximum_execution_time_seconds is None
    assert "maximumExecutionTimeSeconds" not in wl.to_dict()["spec"]


def test_maximum_execution_time_of_a_single_pod_and_of_a_pod_group() -> None:
    pod = make_pod("p", labels={MAX_EXEC: "600"})
    assert workload_for_pod(pod, PRIORITIES).spec.maximum_execution_time_seconds == 600
    group = [make_pod(f"w{i}", group="g", total=2, labels={MAX_EXEC: "60"}) for i in range(2)]
    assert workload_for_pod_group(group, PRIORITIES).spec.maximum_execution_time_seconds == 60


@pytest.mark.parametrize(
    ("name", "value", "want_message"),
    [
        # Kueue's job webhook cases, under their names.
        ("invalid maximum execution time", "NaN", "must be an integer, got 'NaN'"),
        ("zero maximum execution time", "0", "should be greater than 0, got 0"),
        ("negative maximum execution time", "-10", "should be greater than 0, got -10"),
        ("beyond int32", str(2**31), f"is too large, got {2**31}"),
        ("not base 10", "1e3", "must be an integer, got '1e3'"),
        ("surrounding space", " 5", "must be an integer, got ' 5'"),
    ],
)
def test_an_invalid_maximum_execution_time_label_is_refused(
    name: str, value: str, want_message: str
) -> None:
    for build in (
        lambda: workload_for_job(make_job(labels={MAX_EXEC: value}), PRIORITIES),
        lambda: workload_for_pod(make_pod("p", labels={MAX_EXEC: value}), PRIORITIES),
    ):
        with pytest.raises(IntegrationError) as exc:
            build()
        assert exc.value.path == MAX_EXEC_PATH, name
        assert exc.value.detail.startswith(want_message), exc.value.detail
        assert "allowed: a whole number of seconds from 1 to 2147483647" in exc.value.detail


@pytest.mark.parametrize(("value", "want"), [("10", 10), ("+10", 10), ("2147483647", 2**31 - 1)])
def test_valid_maximum_execution_time(value: str, want: int) -> None:
    """Kueue's job webhook case "valid maximum execution time" (and what strconv.Atoi reads)."""
    wl = workload_for_job(make_job(labels={MAX_EXEC: value}), PRIORITIES)
    assert wl.spec.maximum_execution_time_seconds == want
