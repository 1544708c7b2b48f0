"""`kqueue convert` end to end through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from kqueue.cli.main import cli

SAMPLES = Path(__file__).parent.parent / "api" / "kueue_samples"


def test_convert_v1beta1_list() -> None:
    res = CliRunner().invoke(cli, ["convert", str(SAMPLES / "v1beta1.yaml")])
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.stdout))
    assert [d["kind"] for d in docs] == [
        "ResourceFlavor",
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Workload",
    ]
    assert all(d["apiVersion"] == "kqueue.io/v1alpha1" for d in docs)
    cq = docs[2]
    assert cq["spec"]["cohortName"] == "research"
    assert "status" not in cq and "uid" not in docs[0]["metadata"]
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov-check"}]}
    assert "not supported by kqueue" not in res.stderr


def test_convert_keep_status_and_jobs(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["convert", "--keep-status", "-o", "json", str(SAMPLES / "v1beta2.yaml")]
    )
    assert res.exit_code == 0, res.output
    items = yaml.safe_load(res.stdout)["items"]
    job = next(d for d in items if d["kind"] == "Job")
    assert job["metadata"]["labels"]["kqueue.io/queue-name"] == "gpu"


def test_convert_reconverts_its_own_output(tmp_path: Path) -> None:
    first = CliRunner().invoke(cli, ["convert", str(SAMPLES / "v1beta1.yaml")])
    out = tmp_path / "kqueue.yaml"
    out.write_text(first.stdout)
    second = CliRunner().invoke(cli, ["convert", str(out)])
    assert second.exit_code == 0, second.output
    assert second.stdout == first.stdout


def test_convert_invalid_input_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: a}\n"
        "spec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
        "    - name: f\n      resources: [{name: cpu, nominalQuota: '-2'}]\n"
    )
    res = CliRunner().invoke(cli, ["convert", str(bad)])
    assert res.exit_code == 2
    assert (
        f"{bad}: document 1 (ClusterQueue a): spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
        in res.stderr
    )


def test_convert_missing_file_exit_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["convert", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert "nope.yaml: cannot read" in res.stderr


# --- --strict, input order, defaults --------------------------------------------------------------

CQ_WITH_DROPS = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: "4"}]
  concurrentAdmissionPolicy: {}
  namespaceSelector: {}
  fairSharing: {weight: "2"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: default}
spec: {clusterQueue: team-a, fairSharing: {weight: "2"}}
"""


def _invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["convert", *args], input=input)


def test_strict_fails_listing_every_dropped_field() -> None:
    res = _invoke("--strict", "-", input=CQ_WITH_DROPS)
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = [line.strip() for line in res.stderr.splitlines()]
    # fairSharing (ClusterQueue and LocalQueue weights) and admission checks carry over;
    # concurrent admission does not.
    assert lines[0] == "Error: --strict: 1 field(s) or document(s) would be dropped:"
    assert [line.split("): ", 1)[1].split(":")[0] for line in lines[1:]] == [
        "spec.concurrentAdmissionPolicy",
    ]
    assert lines[1].startswith("<stdin>: document 1 (ClusterQueue team-a): ")


ADMISSION_CHECK_SAMPLES = sorted((SAMPLES / "admission_checks").glob("*.yaml"))


@pytest.mark.parametrize("sample", ADMISSION_CHECK_SAMPLES, ids=lambda p: p.name)
def test_kueue_admission_check_samples_convert_strict(sample: Path) -> None:
    """Kueue's site/static/examples/provisioning/*.yaml and sample-admission-check.yaml."""
    res = _invoke("--strict", str(sample))
    assert res.exit_code == 0, res.stderr
    docs = list(yaml.safe_load_all(res.stdout))
    for doc in docs:
        if doc["kind"] == "AdmissionCheck":
            assert doc["spec"]["parameters"]["apiGroup"] == "kqueue.io"
            assert not doc["spec"]["controllerName"].startswith("kueue.x-k8s.io/")
        if doc["kind"] == "ClusterQueue":
            assert doc["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"]


def test_provisioning_sample_maps_the_built_in_controller() -> None:
    res = _invoke("--strict", str(SAMPLES / "admission_checks" / "provisioning-setup.yaml"))
    docs = {d["kind"]: d for d in yaml.safe_load_all(res.stdout)}
    assert docs["AdmissionCheck"]["spec"]["controllerName"] == "kqueue.io/provisioning-request"
    assert docs["ProvisioningRequestConfig"]["spec"]["retryStrategy"]["backoffLimitCount"] == 2
    assert docs["ClusterQueue"]["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "sample-prov", "onFlavors": ["default-flavor"]}]
    }


def test_strict_passes_when_nothing_is_dropped() -> None:
    clean = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\n"
    res = _invoke("--strict", "-", input=clean)
    assert res.exit_code == 0, res.stderr
    assert yaml.safe_load(res.stdout) == {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": "org"},
    }


def test_without_strict_the_drops_are_warnings() -> None:
    res = _invoke("-", input=CQ_WITH_DROPS)
    assert res.exit_code == 0
    assert "spec.concurrentAdmissionPolicy: not supported by kqueue; ignored" in res.stderr


def _keys(node: object) -> object:
    """The key order of every mapping in a document."""
    if isinstance(node, dict):
        return [(k, _keys(v)) for k, v in node.items()]
    if isinstance(node, list):
        return [_keys(v) for v in node]
    return None


def test_output_keeps_input_order_and_adds_no_defaults() -> None:
    res = _invoke("-", input=CQ_WITH_DROPS)
    cq = next(yaml.safe_load_all(res.stdout))
    source = next(yaml.safe_load_all(CQ_WITH_DROPS))
    del source["spec"]["concurrentAdmissionPolicy"]  # fairSharing carries over
    source["apiVersion"] = "kqueue.io/v1alpha1"
    assert _keys(cq) == _keys(source)
    assert cq == source
    assert "queueingStrategy" not in cq["spec"]


def test_renamed_fields_stay_where_they_were() -> None:
    v1beta1 = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: a}\n"
        "spec:\n  cohort: research\n  resourceGroups: []\n"
    )
    cq = yaml.safe_load(_invoke("-", input=v1beta1).stdout)
    assert list(cq["spec"]) == ["cohortName", "resourceGroups"]


def test_with_defaults_prints_the_defaulted_object() -> None:
    res = _invoke("--with-defaults", "-", input=CQ_WITH_DROPS)
    cq = next(yaml.safe_load_all(res.stdout))
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "Never"


def test_generate_name_stays_generate_name() -> None:
    job = (
        "apiVersion: batch/v1\nkind: Job\n"
        "metadata: {generateName: sample-, labels: {kueue.x-k8s.io/queue-name: q}}\n"
        "spec: {template: {spec: {containers: []}}}\n"
    )
    out = yaml.safe_load(_invoke("-", input=job).stdout)
    assert out["metadata"] == {"generateName": "sample-", "labels": {"kqueue.io/queue-name": "q"}}


KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: k
manageJobsWithoutQueueName: true
waitForPodsReady: {timeout: 10m}
fairSharing: {preemptionStrategies: [LessThanInitialShare]}
admissionFairSharing:
  usageHalfLifeTime: 168h
  usageSamplingInterval: 5m
  resourceWeights: {cpu: 1.5, nvidia.com/gpu: 10}
integrations:
  frameworks: [batch/job, kubeflow.org/mxjob]
multiKueue: {gcInterval: 1m, dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental,
  externalFrameworks: [{name: foo.v1.example.com}]}
"""


def test_kueue_configuration_is_converted_and_strict_refuses_what_is_dropped() -> None:
    res = _invoke("-", input=KUEUE_CONFIG)
    assert res.exit_code == 0
    assert yaml.safe_load(res.stdout) == {
        "apiVersion": "config.kqueue.io/v1alpha1",
        "kind": "Configuration",
        "namespace": "k",
        "manageJobsWithoutQueueName": True,
        "waitForPodsReady": {"timeout": "10m", "enable": True},
        "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
        "admissionFairSharing": {
            "usageHalfLifeTime": "168h",
            "usageSamplingInterval": "5m",
            "resourceWeights": {"cpu": 1.5, "nvidia.com/gpu": 10},
        },
        "integrations": {"frameworks": ["batch/job"]},
        "multiKueue": {
            "gcInterval": "1m",
            "dispatcherName": "kqueue.io/multikueue-dispatcher-incremental",
        },
    }
    assert "integrations.frameworks[1]: 'kubeflow.org/mxjob' is not integrated by kqueue" in res.stderr
    assert "multiKueue.externalFrameworks: not supported by kqueue; ignored" in res.stderr
    assert _invoke("--strict", "-", input=KUEUE_CONFIG).exit_code == 2
    ok = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: k\n"
    assert _invoke("--strict", "-", input=ok).exit_code == 0


def test_kueue_v1beta1_configuration_fair_sharing_enable() -> None:
    on = (
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
        "fairSharing: {enable: true}\n"
    )
    assert yaml.safe_load(_invoke("-", input=on).stdout)["fairSharing"] == {}
    off = _invoke("-", input=on.replace("true", "false"))
    assert "fairSharing" not in yaml.safe_load(off.stdout)
    assert "fairSharing: enable is false (v1beta1)" in off.stderr


# --- Kueue's labels and annotations on Jobs, Pods and other kinds -------------------------------


def _pod_template(annotations: dict[str, str] | None = None) -> dict[str, object]:
    meta = {"annotations": annotations} if annotations else {}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "x"}]}}


def _obj(api_version: str, kind: str, spec: dict[str, object], **meta: object) -> dict[str, object]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", **meta},
        "spec": spec,
    }


def _label(key: str, value: str = "v") -> dict[str, dict[str, str]]:
    return {"labels": {key: value}}


def _annotation(key: str, value: str = "v") -> dict[str, dict[str, str]]:
    return {"annotations": {key: value}}


JOB_SPEC = {"template": _pod_template()}
TAS = "kueue.x-k8s.io/podset-required-topology"

# name -> (input object, path in the output, the key expected there)
LABEL_CASES: dict[str, tuple[dict[str, object], tuple[object, ...], str]] = {
    "job queue-name label": (
        _obj("batch/v1", "Job", JOB_SPEC, **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "job priority-class label": (
        _obj("batch/v1", "Job", JOB_SPEC, **_label("kueue.x-k8s.io/priority-class")),
        ("metadata", "labels"), "kqueue.io/priority-class",
    ),
    "job job-min-parallelism annotation": (
        _obj("batch/v1", "Job", JOB_SPEC, **_annotation("kueue.x-k8s.io/job-min-parallelism")),
        ("metadata", "annotations"), "kqueue.io/job-min-parallelism",
    ),
    "job elastic-job annotation": (
        _obj("batch/v1", "Job", JOB_SPEC, **_annotation("kueue.x-k8s.io/elastic-job", "true")),
        ("metadata", "annotations"), "kqueue.io/elastic-job",
    ),
    "job max-exec-time-seconds label": (
        _obj("batch/v1", "Job", JOB_SPEC, **_label("kueue.x-k8s.io/max-exec-time-seconds", "60")),
        ("metadata", "labels"), "kqueue.io/max-exec-time-seconds",
    ),
    "job template podset-required-topology annotation": (
        _obj("batch/v1", "Job", {"template": _pod_template({TAS: "rack"})}),
        ("spec", "template", "metadata", "annotations"), "kqueue.io/podset-required-topology",
    ),
    "pod pod-group-name label": (
        _obj("v1", "Pod", {"containers": []}, **_label("kueue.x-k8s.io/pod-group-name")),
        ("metadata", "labels"), "kqueue.io/pod-group-name",
    ),
    "pod pod-group-total-count annotation": (
        _obj("v1", "Pod", {"containers": []},
             **_annotation("kueue.x-k8s.io/pod-group-total-count", "2")),
        ("metadata", "annotations"), "kqueue.io/pod-group-total-count",
    ),
    "pod podset-slice-size annotation": (
        _obj("v1", "Pod", {"containers": []}, **_annotation("kueue.x-k8s.io/podset-slice-size")),
        ("metadata", "annotations"), "kqueue.io/podset-slice-size",
    ),
    "jobset queue-name label": (
        _obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": []},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "jobset nested pod template topology annotation": (
        _obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": [
            {"name": "w", "template": {"spec": {"template": _pod_template(
                {"kueue.x-k8s.io/podset-preferred-topology": "block"})}}}]}),
        ("spec", "replicatedJobs", 0, "template", "spec", "template", "metadata", "annotations"),
        "kqueue.io/podset-preferred-topology",
    ),
    "deployment queue-name label": (
        _obj("apps/v1", "Deployment", {"template": _pod_template()},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "statefulset pod template group-name annotation": (
        _obj("apps/v1", "StatefulSet",
             {"template": _pod_template({"kueue.x-k8s.io/podset-group-name": "g"})}),
        ("spec", "template", "metadata", "annotations"), "kqueue.io/podset-group-name",
    ),
    "mpijob priority-class label": (
        _obj("kubeflow.org/v2beta1", "MPIJob", {}, **_label("kueue.x-k8s.io/priority-class")),
        ("metadata", "labels"), "kqueue.io/priority-class",
    ),
    "trainjob queue-name label": (
        _obj("trainer.kubeflow.org/v1alpha1", "TrainJob", {"runtimeRef": {"name": "torch"}},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "trainjob priority-class label": (
        _obj("trainer.kubeflow.org/v1alpha1", "TrainJob", {"runtimeRef": {"name": "torch"}},
             **_label("kueue.x-k8s.io/priority-class")),
        ("metadata", "labels"), "kqueue.io/priority-class",
    ),
    "rayjob queue-name label": (
        _obj("ray.io/v1", "RayJob", {"rayClusterSpec": {"headGroupSpec": {"template": _pod_template()}}},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "rayjob worker group template topology annotation": (
        _obj("ray.io/v1", "RayJob", {"rayClusterSpec": {"workerGroupSpecs": [
            {"groupName": "w", "template": _pod_template({TAS: "rack"})}]}}),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template", "metadata", "annotations"),
        "kqueue.io/podset-required-topology",
    ),
    "raycluster priority-class label": (
        _obj("ray.io/v1", "RayCluster", {"headGroupSpec": {"template": _pod_template()}},
             **_label("kueue.x-k8s.io/priority-class")),
        ("metadata", "labels"), "kqueue.io/priority-class",
    ),
    "rayservice queue-name label": (
        _obj("ray.io/v1", "RayService", {"rayClusterConfig": {"headGroupSpec": {"template": _pod_template()}}},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "rayservice worker group template topology annotation": (
        _obj("ray.io/v1", "RayService", {"rayClusterConfig": {"workerGroupSpecs": [
            {"groupName": "w", "template": _pod_template({TAS: "rack"})}]}}),
        ("spec", "rayClusterConfig", "workerGroupSpecs", 0, "template", "metadata", "annotations"),
        "kqueue.io/podset-required-topology",
    ),
    "appwrapper queue-name label": (
        _obj("workload.codeflare.dev/v1beta2", "AppWrapper", {"components": [{"template": {
            "apiVersion": "batch/v1", "kind": "Job", "spec": {"template": _pod_template()}}}]},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "appwrapper wrapped job template topology annotation": (
        _obj("workload.codeflare.dev/v1beta2", "AppWrapper", {"components": [{"template": {
            "apiVersion": "batch/v1", "kind": "Job", "spec": {"template": _pod_template({TAS: "rack"})}}}]}),
        ("spec", "components", 0, "template", "spec", "template", "metadata", "annotations"),
        "kqueue.io/podset-required-topology",
    ),
    "sparkapplication queue-name label": (
        _obj("sparkoperator.k8s.io/v1beta2", "SparkApplication", {"driver": {"coreRequest": "1"}},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "leaderworkerset queue-name label": (
        _obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
             {"leaderWorkerTemplate": {"size": 2, "workerTemplate": _pod_template()}},
             **_label("kueue.x-k8s.io/queue-name")),
        ("metadata", "labels"), "kqueue.io/queue-name",
    ),
    "leaderworkerset leader template topology annotation": (
        _obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
             {"leaderWorkerTemplate": {"leaderTemplate": _pod_template({TAS: "rack"}),
                                       "workerTemplate": _pod_template()}}),
        ("spec", "leaderWorkerTemplate", "leaderTemplate", "metadata", "annotations"),
        "kqueue.io/podset-required-topology",
    ),
    "clustertrainingruntime pod template topology annotation": (
        _obj("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", {"template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": _pod_template(
                {"kueue.x-k8s.io/podset-preferred-topology": "block"})}}}]}}}),
        ("spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template",
         "metadata", "annotations"),
        "kqueue.io/podset-preferred-topology",
    ),
}


@pytest.mark.parametrize("name", list(LABEL_CASES))
def test_kueue_keys_are_renamed(name: str) -> None:
    doc, path, want = LABEL_CASES[name]
    res = _invoke("--strict", "-", input=yaml.safe_dump(doc, sort_keys=False))
    assert res.exit_code == 0, res.stderr
    out = yaml.safe_load(res.stdout)
    node = out
    for part in path:
        node = node[part]
    assert list(node) == [want]
    assert "kueue.x-k8s.io" not in res.stdout
    # Nothing else changed.
    assert out["kind"] == doc["kind"] and out["apiVersion"] == doc["apiVersion"]


def test_unknown_kueue_key_on_another_kind_is_a_dropped_field() -> None:
    doc = _obj("apps/v1", "Deployment", {}, **_label("kueue.x-k8s.io/something"))
    res = _invoke("--strict", "-", input=yaml.safe_dump(doc))
    assert res.exit_code == 2
    assert "(Deployment ns/x): metadata.labels[kueue.x-k8s.io/something]: Kueue-specific key" in (
        res.stderr
    )


SAMPLES_DIR = Path(__file__).resolve().parents[2] / "config" / "samples"


@pytest.mark.parametrize("path", sorted(SAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_kqueue_manifests_convert_to_themselves(path: Path) -> None:
    res = _invoke("--strict", str(path))
    assert res.exit_code == 0, res.stderr
    want = [d for d in yaml.safe_load_all(path.read_text()) if d]
    got = list(yaml.safe_load_all(res.stdout))
    assert got == want
    assert [_keys(d) for d in got] == [_keys(d) for d in want]


MULTIKUEUE_SAMPLES = sorted((SAMPLES / "multikueue").glob("*.yaml"))


@pytest.mark.parametrize("sample", MULTIKUEUE_SAMPLES, ids=lambda p: p.name)
def test_kueue_multikueue_samples_convert_strict(sample: Path) -> None:
    """Kueue's site/static/examples/multikueue/ (multikueue-setup.yaml, tas/*-setup.yaml,
    dev/sample-tas-job.yaml), copied verbatim."""
    res = _invoke("--strict", str(sample))
    assert res.exit_code == 0, res.stderr
    for doc in yaml.safe_load_all(res.stdout):
        assert not str(doc["apiVersion"]).startswith("kueue.x-k8s.io"), doc["kind"]
        if doc["kind"] == "AdmissionCheck":
            assert doc["spec"]["controllerName"] == "kqueue.io/multikueue"
            assert doc["spec"]["parameters"]["apiGroup"] == "kqueue.io"


def test_multikueue_setup_converts_to_valid_kqueue_objects() -> None:
    from kqueue.api.v1alpha1 import MultiKueueCluster, MultiKueueConfig, parse_object

    res = _invoke("--strict", str(SAMPLES / "multikueue" / "tas-manager-setup.yaml"))
    objs = [parse_object(d) for d in yaml.safe_load_all(res.stdout)]
    configs = [o for o in objs if isinstance(o, MultiKueueConfig)]
    clusters = [o for o in objs if isinstance(o, MultiKueueCluster)]
    assert [c.spec.clusters for c in configs] == [["worker1", "worker2"]]
    assert [
        (c.name, c.spec.cluster_source.kube_config.location_type, c.spec.cluster_source.kube_config.location)
        for c in clusters if c.spec.cluster_source.kube_config is not None
    ] == [("worker1", "Secret", "worker1-secret"), ("worker2", "Secret", "worker2-secret")]


def test_v1beta1_multikueue_cluster_moves_kube_config_under_cluster_source() -> None:
    v1beta1 = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: MultiKueueCluster\nmetadata: {name: w1}\n"
        "spec:\n  kubeConfig: {locationType: Path, location: /etc/w1.kubeconfig}\n"
    )
    res = _invoke("--strict", "-", input=v1beta1)
    assert res.exit_code == 0, res.stderr
    assert yaml.safe_load(res.stdout)["spec"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Path", "location": "/etc/w1.kubeconfig"}}
    }


def test_automated_quota_management_is_dropped_with_a_warning() -> None:
    cfg = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: c}\n"
        "spec: {clusters: [w1], quotaManagement: Automated}\n"
    )
    res = _invoke("--strict", "-", input=cfg)
    assert res.exit_code == 2
    assert "spec.quotaManagement: Automated quota management is not supported" in res.stderr
