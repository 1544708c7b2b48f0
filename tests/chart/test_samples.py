"""config/samples: valid, matched to the local cluster's nodes, and behaving as their comments say.

Without a cluster, every sample is validated by kqueue's own models and the whole set is run
through ``kqueue simulate``. On the local cluster each is checked by the API server (server-side
dry-run), and the setup plus the Jobs run for real under kqueue installed by the chart in
development mode. quickstart.yaml and job.yaml are tested by their own suite.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
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
OWNED_BY_OTHERS = {"quickstart.yaml", "job.yaml"}
NAMESPACES = ["team-a", "team-b"]


def docs(name: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]


def with_names(text: str) -> str:
    """generateName -> name, for tools (the simulator, apply) that need a fixed name."""
    return re.sub(r"generateName: (\S+)-\n", r"name: \1\n", text)


def test_the_sample_set_is_complete_and_documented() -> None:
    ours = sorted(p.name for p in SAMPLES.glob("*.yaml") if p.name not in OWNED_BY_OTHERS)
    assert ours == sorted(SETUP + WORKLOADS)
    for name in ours:
        text = (SAMPLES / name).read_text()
        assert text.startswith("# "), f"{name} must start with a comment saying what it is"
    for name in WORKLOADS:
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
@pytest.mark.parametrize("name", SETUP + WORKLOADS)
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
    sample_namespaces: list[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """The setup applied for real; the Jobs admitted where their comments say, and finished.

    The elastic Job and the pod group are checked by the simulator and the dry-run only: the
    controller does not run WorkloadSlices or plain-Pod groups yet.
    """
    with dev_release(cluster, tmp_path, sample_namespaces, request) as dev:
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
