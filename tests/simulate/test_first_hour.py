"""What a new user meets first: the README's example, the samples, Jobs kqueue does not manage,
generateName, a Configuration, and queue names with typos."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from kqueue.api.loader import load_text

from .conftest import run_cli, simulate_json

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"


def _readme_simulate_command() -> list[str]:
    for line in (ROOT / "README.md").read_text().splitlines():
        if re.match(r"^(\.venv/bin/)?kqueue simulate ", line):
            return shlex.split(line.split("#", 1)[0])[2:]
    raise AssertionError("README.md has no `kqueue simulate` example")


def test_readme_example_admits_the_sample_job(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _readme_simulate_command()
    assert args == ["config/samples/quickstart.yaml", "config/samples/job.yaml"]
    monkeypatch.chdir(ROOT)
    result = run_cli("simulate", *args)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Admitted (1)" in result.stdout
    assert re.search(r"default/job-sample-job-\w{5}-\w{5}\s+│ cluster-queue", result.stdout)
    assert result.stderr == ""
    # The same command prints the same names: runs are reproducible.
    assert run_cli("simulate", *args).stdout == result.stdout


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_sample_loads(path: Path) -> None:
    loaded = load_text(path.read_text(), str(path))
    assert loaded.objects
    assert loaded.skipped == []


def test_all_samples_simulate_together() -> None:
    out = simulate_json(*sorted(str(p) for p in SAMPLES.glob("*.yaml")))
    jobs_and_pods = [
        doc
        for p in SAMPLES.glob("*.yaml")
        for doc in yaml.safe_load_all(p.read_text())
        if doc and doc["kind"] in ("Job", "Pod")
    ]
    groups = {d["metadata"]["labels"].get("kqueue.io/pod-group-name") for d in jobs_and_pods}
    jobs = [d for d in jobs_and_pods if d["kind"] == "Job"]
    # cronjob.yaml fires every minute: its Jobs over the default hour (kqueue/sim/cronjob.py).
    cron_jobs = [k for k in out["workloads"] if k.startswith("default/job-sample-cronjob-")]
    assert len(cron_jobs) == 60
    assert len(out["workloads"]) == len(jobs) + len(groups - {None}) + len(cron_jobs)
    sample_job = [k for k in out["workloads"] if k.startswith("default/job-sample-job-")]
    assert len(sample_job) == 1


def test_same_generate_name_manifest_twice_is_two_jobs() -> None:
    job = str(SAMPLES / "job.yaml")
    out = simulate_json(str(SAMPLES / "quickstart.yaml"), job, job)
    names = sorted(out["workloads"])
    assert len(names) == 2 and all(n.startswith("default/job-sample-job-") for n in names)


SETUP = """\
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: user-queue, namespace: default}
spec: {clusterQueue: cq}
"""


def _job(name: str, labels: dict[str, str], namespace: str = "default") -> str:
    return "---\n" + yaml.safe_dump(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                        ],
                    }
                }
            },
        }
    )


def test_job_with_only_kueues_label_is_not_admitted_and_says_what_to_do() -> None:
    text = SETUP + _job("from-kueue", {"kueue.x-k8s.io/queue-name": "user-queue"})
    result = run_cli("simulate", "-o", "json", "-", input=text)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["workloads"] == {}
    assert (
        "warning: <stdin>: document 4 (Job default/from-kueue): not managed by kqueue, skipped: "
        in result.stderr
    )
    for words in (
        "kueue.x-k8s.io/queue-name=user-queue",
        "label it kqueue.io/queue-name=user-queue",
        "kqueue convert",
    ):
        assert words in result.stderr


def test_kueue_keys_on_a_managed_job_are_ignored_with_a_warning() -> None:
    text = SETUP + _job(
        "mixed",
        {"kqueue.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "missing"},
    )
    result = run_cli("simulate", "-o", "json", "-", input=text)
    # Kueue's priority-class label is not read: no "WorkloadPriorityClass not found" error.
    assert result.exit_code == 0, result.stderr
    assert "metadata.labels[kueue.x-k8s.io/priority-class]: Kueue's key is ignored" in (
        result.stderr
    )


def test_configuration_document_manages_unlabelled_jobs() -> None:
    config = (
        "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
    )
    default_lq = (
        "---\napiVersion: kqueue.io/v1alpha1\nkind: LocalQueue\n"
        "metadata: {name: default, namespace: default}\nspec: {clusterQueue: cq}\n"
    )
    text = SETUP + default_lq + _job("plain", {}) + _job("sys", {}, namespace="kube-system")
    without = simulate_json("-", input=text)
    assert without["workloads"] == {}
    out = simulate_json("-", input=text + config)
    [key] = out["workloads"]
    assert key.startswith("default/job-plain-")
    assert out["workloads"][key]["state"] == "Admitted"


def test_two_configurations_are_an_error() -> None:
    config = "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    result = run_cli("simulate", "-", input=SETUP + config + config)
    assert result.exit_code == 2
    assert "<stdin>: document 5 (Configuration): a second Configuration" in result.stderr


def test_unknown_local_queue_gets_a_suggestion() -> None:
    text = SETUP + _job("typo", {"kqueue.io/queue-name": "user-qeue"})
    result = run_cli("simulate", "-o", "json", "-", input=text)
    assert result.exit_code == 0
    assert (
        "warning: <stdin>: document 4 (Job default/typo): LocalQueue default/user-qeue is not "
        'defined; did you mean "user-queue"?'
    ) in result.stderr


def test_unknown_cluster_queue_gets_a_suggestion() -> None:
    text = SETUP.replace("spec: {clusterQueue: cq}", "spec: {clusterQueue: cqq}")
    result = run_cli("simulate", "-", input=text)
    assert 'LocalQueue default/user-queue: ClusterQueue cqq is not defined; did you mean "cq"?' in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("condition", "want_skipped"),
    [
        pytest.param({"type": "Complete", "status": "True"}, True, id="complete"),
        pytest.param({"type": "Failed", "status": "True"}, True, id="failed"),
        pytest.param({"type": "Complete", "status": "False"}, False, id="complete false"),
        pytest.param({"type": "SuccessCriteriaMet", "status": "True"}, False, id="not yet"),
    ],
)
def test_finished_job_gets_no_workload(condition: dict[str, str], want_skipped: bool) -> None:
    job = yaml.safe_load(_job("done", {"kqueue.io/queue-name": "user-queue"}).lstrip("-\n"))
    job["status"] = {"conditions": [condition]}
    result = run_cli("simulate", "-o", "json", "-", input=SETUP + "---\n" + yaml.safe_dump(job))
    assert result.exit_code == 0, result.stderr
    assert (json.loads(result.stdout)["workloads"] == {}) is want_skipped
    assert (
        f"(Job default/done): finished (condition {condition['type']})" in result.stderr
    ) is want_skipped


def test_a_job_whose_workload_is_in_the_input_is_followed_whatever_its_labels() -> None:
    """A dump of a cluster: the Job (Kueue's label only) and the Workload made for it; the
    controller keeps reconciling an object it has a Workload for, so its annotations count."""
    workload = """\
---
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata:
  name: job-old-12345
  namespace: default
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: old, uid: u1, controller: true}]
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""
    job = yaml.safe_load(_job("old", {"kueue.x-k8s.io/queue-name": "user-queue"}).lstrip("-\n"))
    job["metadata"]["annotations"] = {"simulate.kqueue.io/run-time": "1m"}
    text = SETUP + workload + "---\n" + yaml.safe_dump(job)
    result = run_cli("simulate", "-o", "json", "-", input=text)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    out = json.loads(result.stdout)
    assert out["workloads"]["default/job-old-12345"]["state"] == "Finished"


JOBSET_CONFIG = (
    "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    "integrations:\n  frameworks: [batch/job, pod, jobset.x-k8s.io/jobset]\n"
)


def test_a_jobset_simulates_as_one_gang_when_its_integration_is_enabled() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    jobset = (SAMPLES / "jobset.yaml").read_text()
    out = simulate_json("-", input=setup + "\n---\n" + jobset + JOBSET_CONFIG)
    [(key, wl)] = out["workloads"].items()
    assert key.startswith("default/jobset-sample-jobset-")
    assert wl["state"] == "Admitted"
    assert [(ps["name"], ps["count"]) for ps in wl["podSets"]] == [("leader", 1), ("workers", 4)]


def test_a_jobset_is_skipped_with_a_reason_when_its_integration_is_off() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    jobset = (SAMPLES / "jobset.yaml").read_text()
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + jobset)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "jobset.x-k8s.io/jobset integration is not enabled" in result.stderr


TRAINJOB_CONFIG = (
    "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    "integrations:\n  frameworks: [batch/job, pod, trainer.kubeflow.org/trainjob]\n"
)


def test_a_trainjob_simulates_with_the_pod_sets_of_its_runtime() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    trainjob = (SAMPLES / "trainjob.yaml").read_text()
    out = simulate_json("-", input=setup + "\n---\n" + trainjob + TRAINJOB_CONFIG)
    [(key, wl)] = out["workloads"].items()
    assert key.startswith("default/trainjob-sample-trainjob-")
    assert wl["state"] == "Admitted"
    assert [(ps["name"], ps["count"]) for ps in wl["podSets"]] == [("node", 2)]


def test_a_trainjob_without_its_runtime_is_refused_naming_the_field() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    trainjob = (SAMPLES / "trainjob.yaml").read_text().split("---\n", 1)[1]
    result = run_cli("simulate", "-", input=setup + "\n---\n" + trainjob + TRAINJOB_CONFIG)
    assert result.exit_code != 0
    assert "spec.runtimeRef.name" in result.stderr
    assert "ClusterTrainingRuntime 'sample-runtime' not found" in result.stderr


def test_explain_finds_a_trainjob_by_its_name() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    trainjob = (SAMPLES / "trainjob.yaml").read_text()
    result = run_cli(
        "explain", "-f", "-", "sample-trainjob", input=setup + "\n---\n" + trainjob + TRAINJOB_CONFIG
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Workload default/trainjob-sample-trainjob-")
    assert "pod set node (2 pods)" in result.stdout


def test_a_trainjob_is_skipped_with_a_reason_when_its_integration_is_off() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    trainjob = (SAMPLES / "trainjob.yaml").read_text()
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + trainjob)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "trainer.kubeflow.org/trainjob integration is not enabled" in result.stderr


RAY_CONFIG = (
    "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    "integrations:\n  frameworks: [batch/job, pod, ray.io/rayjob, ray.io/raycluster]\n"
)


def test_ray_objects_simulate_as_one_gang_each_when_their_integrations_are_enabled() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    ray = (SAMPLES / "rayjob.yaml").read_text() + "\n---\n" + (SAMPLES / "raycluster.yaml").read_text()
    out = simulate_json("-", input=setup + "\n---\n" + ray + RAY_CONFIG)
    pod_sets = {
        key.split("/")[1].rsplit("-", 1)[0]: [(ps["name"], ps["count"]) for ps in wl["podSets"]]
        for key, wl in out["workloads"].items()
    }
    assert pod_sets == {
        "rayjob-sample-rayjob": [("head", 1), ("workers", 1), ("submitter", 1)],
        "raycluster-sample-raycluster": [("head", 1), ("workers", 2)],
    }


def test_explain_finds_a_rayjob_by_its_name() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    ray = (SAMPLES / "rayjob.yaml").read_text()
    result = run_cli("explain", "-f", "-", "sample-rayjob", input=setup + "\n---\n" + ray + RAY_CONFIG)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Workload default/rayjob-sample-rayjob-")
    assert "pod set submitter (1 pod" in result.stdout


def test_a_rayjob_is_skipped_with_a_reason_when_its_integration_is_off() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    ray = (SAMPLES / "rayjob.yaml").read_text()
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + ray)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "ray.io/rayjob integration is not enabled" in result.stderr


RAYSERVICE_CONFIG = RAY_CONFIG.replace("ray.io/raycluster]", "ray.io/raycluster, ray.io/rayservice]")


def test_kueue_s_rayservice_sample_converted_is_admitted_as_one_gang() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    service = (SAMPLES / "rayservice.yaml").read_text()
    out = simulate_json("-", input=setup + "\n---\n" + service + RAYSERVICE_CONFIG)
    [(key, wl)] = out["workloads"].items()
    assert key.startswith("default/rayservice-test-rayservice-") and wl["state"] == "Admitted"
    assert [(ps["name"], ps["count"]) for ps in wl["podSets"]] == [("head", 1), ("small-group", 1)]
    result = run_cli("explain", "-f", "-", "test-rayservice", input=setup + "\n---\n" + service + RAYSERVICE_CONFIG)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Workload default/rayservice-test-rayservice-")


def test_a_rayservice_is_skipped_with_a_reason_when_its_integration_is_off() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    service = (SAMPLES / "rayservice.yaml").read_text()
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + service + RAY_CONFIG)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "ray.io/rayservice integration is not enabled" in result.stderr


LWS_CONFIG = (
    "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    "integrations:\n  frameworks: [batch/job, pod, leaderworkerset.x-k8s.io/leaderworkerset]\n"
)


def test_a_leaderworkerset_simulates_as_one_gang_per_group() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    lws = (SAMPLES / "leaderworkerset.yaml").read_text()
    out = simulate_json("-", input=setup + "\n---\n" + lws + LWS_CONFIG)
    assert sorted(out["workloads"]) == ["default/sample-lws-0", "default/sample-lws-1"]
    for wl in out["workloads"].values():
        assert [ps["count"] for ps in wl["podSets"]] == [2]


def test_explain_finds_a_leaderworkerset_group_by_its_name() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    lws = (SAMPLES / "leaderworkerset.yaml").read_text()
    result = run_cli("explain", "-f", "-", "sample-lws-1", input=setup + "\n---\n" + lws + LWS_CONFIG)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Workload default/sample-lws-1")


def test_a_leaderworkerset_is_skipped_with_a_reason_when_its_integration_is_off() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    lws = (SAMPLES / "leaderworkerset.yaml").read_text()
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + lws)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "leaderworkerset.x-k8s.io/leaderworkerset integration is not enabled" in result.stderr
