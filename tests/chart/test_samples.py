"""config/samples: valid, matched to the local cluster's nodes, and behaving as their comments say.

Without a cluster, every sample is validated by kqueue's own models and the whole set is run
through ``kqueue simulate``. On the local cluster each is checked by the API server (server-side
dry-run), and the setup plus the Jobs, the elastic Job and the pod group run for real under
kqueue installed by the chart in development mode. quickstart.yaml and job.yaml are tested by their own suite.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.v1alpha1 import parse_object, validate
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, DEFAULT_NODES
from tests.chart.conftest import ROOT
from tests.chart.devrelease import condition, dev_release, kubectl_json, wait_for
from tests.chart.test_kubectl import install_crds

Obj = dict[str, Any]

SAMPLES = ROOT / "config" / "samples"
# Applied in this order: each file's comment says what it needs.
SETUP = ["flavors.yaml", "priority-classes.yaml", "cohort.yaml", "local-queues.yaml"]
WORKLOADS = [
    "team-a-job.yaml",
    "gpu-job.yaml",
    "non-preemptible-job.yaml",
    "elastic-job.yaml",
    "pod-group.yaml",
]
# Tested by their own suites: quickstart and job (tests/controller_e2e), and the samples that need
# an operator (tests/controller_e2e/test_jobset.py and test_mpijob.py run them with the real operators).
OWNED_BY_OTHERS = {
    "quickstart.yaml", "job.yaml", "jobset.yaml", "mpijob.yaml", "trainjob.yaml",
    # tests/controller_e2e/test_ray.py runs them with KubeRay, test_leaderworkerset.py with LWS
    "rayjob.yaml", "raycluster.yaml", "rayservice.yaml", "leaderworkerset.yaml",
    # Simulated on the local cluster's nodes by tests/simulate/test_topology.py.
    "topology.yaml",
    # tests/controller_e2e/test_kubeflow.py runs them with the training-operator
    "pytorchjob.yaml", "tfjob.yaml", "xgboostjob.yaml", "paddlejob.yaml", "jaxjob.yaml",
    # simulated and explained by tests/simulate/test_cronjob.py
    "cronjob.yaml",
    # tests/controller_e2e/test_appwrapper.py runs appwrapper.yaml with the AppWrapper operator;
    # all three are simulated by tests/simulate/test_appwrapper_samples.py
    "appwrapper.yaml", "appwrapper-deployment.yaml", "appwrapper-leaderworkerset.yaml",
    # simulated by tests/simulate/test_sparkapplication_sample.py, created against the real CRD
    # by tests/controller_e2e/test_sparkapplication.py
    "sparkapplication.yaml",
}
# Samples of opt-in integrations (statefulset, deployment): run under kqueue with those
# frameworks enabled by tests/controller_e2e/test_apps.py, simulated by
# tests/api/test_apps_integrations.py; checked here by the API server.
OPT_IN = ["statefulset.yaml", "deployment.yaml"]
NAMESPACES = ["team-a", "team-b"]


def docs(name: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]


def with_names(text: str) -> str:
    """generateName -> name, for tools (the simulator, apply) that need a fixed name."""
    return re.sub(r"generateName: (\S+)-\n", r"name: \1\n", text)


def test_the_sample_set_is_complete_and_documented() -> None:
    ours = sorted(p.name for p in SAMPLES.glob("*.yaml") if p.name not in OWNED_BY_OTHERS)
    assert ours == sorted(SETUP + WORKLOADS + OPT_IN)
    for name in ours:
        text = (SAMPLES / name).read_text()
        assert text.startswith("# "), f"{name} must start with a comment saying what it is"
    for name in WORKLOADS + OPT_IN:
        assert "How it behaves:" in (SAMPLES / name).read_text(), name


@pytest.mark.parametrize("name", SETUP + WORKLOADS)
def test_kqueue_objects_in_samples_are_valid(name: str) -> None:
    for doc in docs(name):
        if doc["apiVersion"].startswith("kqueue.io/"):
            obj = parse_object(doc)
            assert validate(obj) == [], (name, doc["metadata"]["name"])


def _tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        same = t.get("key") == taint["key"] and t.get("effect", taint["effect"]) == taint["effect"]
        exists = t.get("operator", "Equal") == "Exists"
        if same and (exists or t.get("value") == taint.get("value")):
            return True
    return False


def test_flavors_match_the_local_cluster_nodes() -> None:
    nodes = [n.manifest() for n in DEFAULT_NODES]
    for rf in docs("flavors.yaml"):
        spec = rf["spec"]
        matching = [
            n
            for n in nodes
            if all(n["metadata"]["labels"].get(k) == v for k, v in spec["nodeLabels"].items())
        ]
        assert matching, f"flavor {rf['metadata']['name']} selects no local cluster node"
        for node in matching:
            taints = node["spec"]["taints"]
            assert sorted(map(str, spec.get("nodeTaints", []))) == sorted(map(str, taints))
            for taint in taints:
                assert _tolerates(spec.get("tolerations", []), taint), (rf, taint)
    gpu = next(rf for rf in docs("flavors.yaml") if rf["metadata"]["name"] == "gpu-a100")
    assert all(n["spec"]["taints"] == [] for n in nodes if n["metadata"]["name"] == "kwok-gpu-1")
    assert gpu["spec"]["nodeLabels"]["nvidia.com/gpu.product"] == "A100"


def test_flavors_agree_with_the_quickstart() -> None:
    """Both files define on-demand and spot; applying one after the other changes nothing."""
    quickstart = SAMPLES / "quickstart.yaml"
    if not quickstart.exists():
        pytest.skip("quickstart.yaml is not there yet")
    theirs = {
        d["metadata"]["name"]: d["spec"]
        for d in yaml.safe_load_all(quickstart.read_text())
        if d and d.get("kind") == "ResourceFlavor"
    }
    for rf in docs("flavors.yaml"):
        name = rf["metadata"]["name"]
        if name in theirs:
            assert theirs[name] == rf["spec"], name


def test_pod_group_count_matches_its_pods() -> None:
    pods = docs("pod-group.yaml")
    counts = {p["metadata"]["annotations"]["kqueue.io/pod-group-total-count"] for p in pods}
    assert counts == {str(len(pods))}


def test_samples_behave_as_their_comments_say_in_the_simulator(tmp_path: Path) -> None:
    files = []
    for name in SETUP + WORKLOADS:
        path = tmp_path / name
        path.write_text(with_names((SAMPLES / name).read_text()))
        files.append(str(path))
    res = subprocess.run(
        [sys.executable, "-m", "kqueue", "simulate", *files, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    by_owner = {
        key.split("/")[0] + "/" + key.split("/")[1]: wl for key, wl in out["workloads"].items()
    }

    def workload(namespace: str, needle: str) -> Obj:
        found = [wl for key, wl in by_owner.items() if key.startswith(namespace) and needle in key]
        assert len(found) == 1, (needle, list(by_owner))
        return found[0]

    team_a = workload("team-a/", "team-a-job")
    assert (team_a["state"], team_a["clusterQueue"]) == ("Admitted", "team-a")
    assert team_a["podSets"][0]["count"] == 3
    assert team_a["podSets"][0]["flavors"] == {"cpu": "on-demand", "memory": "on-demand"}

    gpu = workload("team-b/", "gpu-job")
    assert (gpu["state"], gpu["clusterQueue"]) == ("Admitted", "gpu")
    assert set(gpu["podSets"][0]["flavors"].values()) == {"gpu-a100"}
    assert "nvidia.com/gpu" in gpu["podSets"][0]["flavors"]

    # Within team-b's nominal quota: it never borrows.
    non_preemptible = workload("team-b/", "non-preemptible-job")
    assert (non_preemptible["state"], non_preemptible["clusterQueue"]) == ("Admitted", "team-b")
    team_b_usage = out["clusterQueues"]["team-b"]["usage"]["on-demand"]
    assert team_b_usage["cpu"] == "2"

    elastic = workload("team-a/", "elastic-job")
    assert elastic["state"] == "Admitted" and elastic["podSets"][0]["count"] == 2

    # Three pods, one gang Workload, admitted as a whole. team-a's 4 on-demand CPUs are taken
    # (3 + 1) and the cohort can lend only 2 (team-b keeps 2, and uses the other 2), so the
    # group falls back to spot, the next flavor.
    group = workload("team-a/", "sample-group")
    assert group["state"] == "Admitted"
    assert [ps["count"] for ps in group["podSets"]] == [3]
    assert group["podSets"][0]["flavors"] == {"cpu": "spot", "memory": "spot"}
    assert out["clusterQueues"]["team-a"]["pendingWorkloads"] == 0


# -- on the local cluster ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_namespaces(cluster: LocalCluster) -> Iterator[list[str]]:
    """The samples' fixed namespaces, for the module (a namespace takes a while to go away)."""
    install_crds(cluster)
    for ns in NAMESPACES:
        cluster.kubectl("create", "namespace", ns)
    try:
        yield NAMESPACES
    finally:
        for ns in NAMESPACES:
            cluster.kubectl("delete", "namespace", ns, "--timeout=60s", check=False)


@pytest.mark.cluster
@pytest.mark.parametrize("name", SETUP + WORKLOADS + OPT_IN)
def test_every_sample_passes_server_side_dry_run(
    cluster: LocalCluster, sample_namespaces: list[str], name: str
) -> None:
    text = (SAMPLES / name).read_text()
    verb = "create" if "generateName:" in text else "apply"
    res = cluster.kubectl(verb, "--dry-run=server", "-f", str(SAMPLES / name), check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("(server dry run)") == len(docs(name)), res.stdout


def _delete_setup(cluster: LocalCluster) -> None:
    for name in reversed(SETUP):
        cluster.kubectl(
            "delete",
            "-f",
            str(SAMPLES / name),
            "--ignore-not-found",
            "--timeout=30s",
            check=False,
        )


@pytest.mark.cluster
def test_setup_and_jobs_run_under_kqueue(
    cluster: LocalCluster,
    helm_bin: Path,
    sample_namespaces: list[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """The setup applied for real; the Jobs admitted where their comments say, and finished.

    The elastic Job and the pod group have their own test below.
    """
    with dev_release(cluster, helm_bin, tmp_path, sample_namespaces, request) as dev:
        dev.install()
        dev.start()
        try:
            for name in SETUP:
                cluster.kubectl("apply", "-f", str(SAMPLES / name))
            jobs = {}
            for name in ("team-a-job.yaml", "gpu-job.yaml", "non-preemptible-job.yaml"):
                # Pods complete quickly here; the samples use 30s so people can watch them.
                text = (
                    (SAMPLES / name)
                    .read_text()
                    .replace(
                        f"{COMPLETE_AFTER_ANNOTATION}: 30s", f"{COMPLETE_AFTER_ANNOTATION}: 2s"
                    )
                )
                created = json.loads(
                    cluster.kubectl("create", "-o", "json", "-f", "-", input=text).stdout
                )
                jobs[name] = created
            _check_jobs(cluster, jobs)
            assert dev.forbidden_in_log() == []
        finally:
            for created in locals().get("jobs", {}).values():
                meta = created["metadata"]
                cluster.kubectl(
                    "delete",
                    "job",
                    meta["name"],
                    "-n",
                    meta["namespace"],
                    "--wait=true",
                    "--timeout=30s",
                    check=False,
                )
            _delete_setup(cluster)


def _workload_of(cluster: LocalCluster, job: Obj) -> Obj | None:
    ns, uid = job["metadata"]["namespace"], job["metadata"]["uid"]
    for wl in kubectl_json(cluster, "get", "workloads.kqueue.io", "-n", ns)["items"]:
        if any(r["uid"] == uid for r in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def _check_jobs(cluster: LocalCluster, jobs: dict[str, Obj]) -> None:
    expected = {
        "team-a-job.yaml": ("team-a", {"on-demand"}, {"kwok-on-demand-1", "kwok-on-demand-2"}),
        "gpu-job.yaml": ("gpu", {"gpu-a100"}, {"kwok-gpu-1"}),
        "non-preemptible-job.yaml": (
            "team-b",
            {"on-demand"},
            {"kwok-on-demand-1", "kwok-on-demand-2"},
        ),
    }
    for name, job in jobs.items():
        cq, flavors, nodes = expected[name]

        def admitted(job: Obj = job) -> Obj | None:
            wl = _workload_of(cluster, job)
            cond = condition(wl, "Admitted") if wl else None
            return wl if cond and cond["status"] == "True" else None

        wl = wait_for(f"{name} admitted", admitted, timeout=60)
        admission = wl["status"]["admission"]
        assert admission["clusterQueue"] == cq, name
        assert set(admission["podSetAssignments"][0]["flavors"].values()) == flavors, name

        ns = job["metadata"]["namespace"]
        selector = f"batch.kubernetes.io/job-name={job['metadata']['name']}"

        def placed(ns: str = ns, selector: str = selector) -> list[Obj] | None:
            pods = kubectl_json(cluster, "get", "pods", "-n", ns, "-l", selector)["items"]
            bound = [p for p in pods if p["spec"].get("nodeName")]
            return bound if bound and len(bound) == len(pods) else None

        pods = wait_for(f"{name} pods placed", placed, timeout=60)
        assert {p["spec"]["nodeName"] for p in pods} <= nodes, name
        for pod in pods:
            assert not pod["spec"].get("schedulingGates"), name

    for name, job in jobs.items():

        def finished(job: Obj = job) -> Obj | None:
            wl = _workload_of(cluster, job)
            cond = condition(wl, "Finished") if wl else None
            return wl if cond and cond["status"] == "True" else None

        wait_for(f"{name} finished", finished, timeout=90)
    table = cluster.kubectl("get", "clusterqueues", "team-a", "team-b", "gpu").stdout
    assert re.search(r"team-a\s+research\s+0\b", table), table


# -- elastic-job.yaml and pod-group.yaml under the chart ------------------------------------------


@pytest.mark.cluster
def test_elastic_job_and_pod_group_run_under_kqueue(
    cluster: LocalCluster,
    helm_bin: Path,
    sample_namespaces: list[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Both samples behave as their comments say, through the chart's webhooks and RBAC."""
    with dev_release(cluster, helm_bin, tmp_path, sample_namespaces, request) as dev:
        dev.install()
        dev.start()
        job: Obj | None = None
        try:
            for name in SETUP:
                cluster.kubectl("apply", "-f", str(SAMPLES / name))
            job = json.loads(
                cluster.kubectl(
                    "create", "-o", "json", "-f", str(SAMPLES / "elastic-job.yaml")
                ).stdout
            )
            _check_elastic_job(cluster, job)
            # The elastic Job keeps 1 of team-a's 4 on-demand CPUs: the group's 3 fit beside it.
            _check_pod_group(cluster)
            assert dev.forbidden_in_log() == []
        finally:
            if job is not None:
                cluster.kubectl(
                    "delete", "job", job["metadata"]["name"], "-n", "team-a",
                    "--wait=true", "--timeout=30s", check=False,
                )
            _delete_pod_group(cluster)
            _delete_setup(cluster)


def _slices(cluster: LocalCluster, job: Obj) -> list[Obj]:
    uid = job["metadata"]["uid"]
    return [
        wl
        for wl in kubectl_json(cluster, "get", "workloads.kqueue.io", "-n", "team-a")["items"]
        if any(r["uid"] == uid for r in wl["metadata"].get("ownerReferences", []))
    ]


def _is_true(obj: Obj | None, kind: str) -> bool:
    cond = condition(obj, kind) if obj else None
    return bool(cond and cond["status"] == "True")


def _admitted_slice(cluster: LocalCluster, job: Obj, count: int) -> Obj:
    def probe() -> Obj | None:
        for wl in _slices(cluster, job):
            if _is_true(wl, "Admitted") and not _is_true(wl, "Finished"):
                [psa] = wl["status"]["admission"]["podSetAssignments"]
                if psa["count"] == count:
                    return wl
        return None

    found: Obj = wait_for(f"an admitted slice of the elastic Job with {count} pods", probe)
    return found


def _running(cluster: LocalCluster, selector: str, n: int) -> list[Obj]:
    """Exactly ``n`` live pods matching ``selector``, all Running on a node, none gated."""

    def probe() -> list[Obj] | None:
        pods = [
            p
            for p in kubectl_json(cluster, "get", "pods", "-n", "team-a", "-l", selector)["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        ok = len(pods) == n and all(
            p["status"].get("phase") == "Running"
            and p["spec"].get("nodeName")
            and not p["spec"].get("schedulingGates")
            for p in pods
        )
        return pods if ok else None

    found: list[Obj] = wait_for(f"{n} pods ({selector}) Running", probe, timeout=60)
    return found


def _team_a_cpu(cluster: LocalCluster) -> dict[str, str]:
    cq = kubectl_json(cluster, "get", "clusterqueues.kqueue.io", "team-a")
    return {
        fu["name"]: r["total"]
        for fu in cq.get("status", {}).get("flavorsUsage", [])
        for r in fu["resources"]
        if r["name"] == "cpu"
    }


def _check_elastic_job(cluster: LocalCluster, job: Obj) -> None:
    name = job["metadata"]["name"]
    selector = f"batch.kubernetes.io/job-name={name}"
    # Admitted as a Workload for 2 pods (2 x 500m CPU).
    first = _admitted_slice(cluster, job, 2)
    flavors = first["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert flavors["cpu"] == "on-demand", flavors
    before = {p["metadata"]["uid"] for p in _running(cluster, selector, 2)}
    wait_for("team-a charged 1 CPU", lambda: _team_a_cpu(cluster).get("on-demand") == "1")

    # Scale up: a replacement slice for 4, naming the old one; the old one is finished as
    # replaced; only the 2 new pods are charged, on the same flavors; running pods untouched.
    cluster.kubectl(
        "patch", "job", name, "-n", "team-a", "--type=merge", "-p", '{"spec":{"parallelism":4}}'
    )
    second = _admitted_slice(cluster, job, 4)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    annotations = second["metadata"].get("annotations", {})
    assert annotations["kqueue.io/workload-slice-replacement-for"] == (
        f"team-a/{first['metadata']['name']}"
    )
    assert second["status"]["admission"]["podSetAssignments"][0]["flavors"] == flavors

    def old_finished() -> Obj | None:
        for wl in _slices(cluster, job):
            if wl["metadata"]["name"] == first["metadata"]["name"] and _is_true(wl, "Finished"):
                return wl
        return None

    old = wait_for("the old slice Finished", old_finished)
    assert condition(old, "Finished")["reason"] == "WorkloadSliceReplaced"
    scaled_up = {p["metadata"]["uid"] for p in _running(cluster, selector, 4)}
    assert before <= scaled_up
    wait_for("team-a charged 2 CPUs", lambda: _team_a_cpu(cluster).get("on-demand") == "2")

    # Scale down: the admitted slice shrinks in place and the quota is freed at once; the Job
    # controller removes the surplus pods, the others keep running.
    cluster.kubectl(
        "patch", "job", name, "-n", "team-a", "--type=merge", "-p", '{"spec":{"parallelism":2}}'
    )
    shrunk = _admitted_slice(cluster, job, 2)
    assert shrunk["metadata"]["name"] == second["metadata"]["name"]
    assert shrunk["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] == "1"
    wait_for("team-a charged 1 CPU again", lambda: _team_a_cpu(cluster).get("on-demand") == "1")
    assert {p["metadata"]["uid"] for p in _running(cluster, selector, 2)} <= scaled_up


GROUP_SELECTOR = "kqueue.io/pod-group-name=sample-group"


def _group_workload(cluster: LocalCluster) -> Obj | None:
    pods = kubectl_json(cluster, "get", "pods", "-n", "team-a", "-l", GROUP_SELECTOR)["items"]
    uids = {p["metadata"]["uid"] for p in pods}
    for wl in kubectl_json(cluster, "get", "workloads.kqueue.io", "-n", "team-a")["items"]:
        if any(r["uid"] in uids for r in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def _check_pod_group(cluster: LocalCluster) -> None:
    # Pods complete quickly here; the sample uses 30s so people can watch them.
    pods = [
        yaml.safe_dump(p).replace(f"{COMPLETE_AFTER_ANNOTATION}: 30s", f"{COMPLETE_AFTER_ANNOTATION}: 15s")
        for p in docs("pod-group.yaml")
    ]
    assert all(f"{COMPLETE_AFTER_ANNOTATION}: 15s" in p for p in pods)
    for text in pods[:-1]:
        cluster.kubectl("create", "-f", "-", input=text)
    # Two of three: held by the gate (with the label and finalizer of the plain-pod webhook),
    # and no Workload until the whole group exists.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        held = kubectl_json(cluster, "get", "pods", "-n", "team-a", "-l", GROUP_SELECTOR)["items"]
        assert len(held) == 2
        for p in held:
            assert {"name": "kqueue.io/admission"} in p["spec"].get("schedulingGates", []), p
            assert p["metadata"]["labels"]["kqueue.io/managed"] == "true"
            assert "kqueue.io/managed" in p["metadata"]["finalizers"]
            assert not p["spec"].get("nodeName")
        assert _group_workload(cluster) is None
        time.sleep(0.5)

    cluster.kubectl("create", "-f", "-", input=pods[-1])

    def admitted() -> Obj | None:
        wl = _group_workload(cluster)
        return wl if _is_true(wl, "Admitted") else None

    wl = wait_for("the pod group admitted", admitted)
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    assert psa["count"] == 3
    assert set(psa["flavors"].values()) == {"on-demand"}, psa
    node_labels = {
        d["metadata"]["name"]: d["spec"]["nodeLabels"] for d in docs("flavors.yaml")
    }["on-demand"]

    running = _running(cluster, GROUP_SELECTOR, 3)
    nodes = {
        n["metadata"]["name"]: n["metadata"]["labels"]
        for n in kubectl_json(cluster, "get", "nodes")["items"]
    }
    for p in running:
        assert p["spec"]["nodeSelector"] == node_labels, p["metadata"]["name"]
        labels = nodes[p["spec"]["nodeName"]]
        assert labels.get("type") == "kwok", labels
        assert all(labels.get(k) == v for k, v in node_labels.items()), labels
    # Released together: all were scheduled within moments of each other.
    scheduled = [
        datetime.fromisoformat(condition(p, "PodScheduled")["lastTransitionTime"])
        for p in running
    ]
    assert max(scheduled) - min(scheduled) <= timedelta(seconds=5), scheduled

    def finished() -> Obj | None:
        wl = _group_workload(cluster)
        return wl if _is_true(wl, "Finished") else None

    done = wait_for("the pod group finished", finished, timeout=90)
    assert condition(done, "Finished")["reason"] == "Succeeded"


def _delete_pod_group(cluster: LocalCluster) -> None:
    cluster.kubectl(
        "delete", "pods", "-n", "team-a", "-l", GROUP_SELECTOR, "--wait=false", check=False
    )
    # A pod kqueue has not released keeps its finalizer once kqueue stops: drop it here.
    for p in kubectl_json(cluster, "get", "pods", "-n", "team-a", "-l", GROUP_SELECTOR)["items"]:
        cluster.kubectl(
            "patch", "pod", p["metadata"]["name"], "-n", "team-a", "--type=merge",
            "-p", '{"metadata":{"finalizers":null}}', check=False,
        )
