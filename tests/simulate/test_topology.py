"""`kqueue simulate` and `kqueue explain` with topology-aware flavors: v1 Nodes and Pods, both
Topology kinds, topologyAssignment in the Workload status shape, domains in explanations."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from .conftest import run_cli, simulate_json

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "topology"
FILES = [str(EXAMPLE / f) for f in ("cluster.yaml", "nodes.yaml", "jobs.yaml")]
RACK = "cloud.example.com/rack"


def _by_job(out: dict) -> dict[str, dict]:
    return {k.split("/", 1)[1].rsplit("-", 1)[0].removeprefix("job-"): v
            for k, v in out["workloads"].items()}


def _hosts(entry: dict) -> dict[str, int]:
    ta = entry["podSets"][0]["topologyAssignment"]
    out: dict[str, int] = {}
    for s in ta["slices"]:
        (level,) = s["valuesPerLevel"]
        if "universal" in level:
            names = [level["universal"]] * s["domainCount"]
        else:
            ind = level["individual"]
            names = [ind.get("prefix", "") + r + ind.get("suffix", "") for r in ind["roots"]]
        counts = s["podCounts"].get("individual") or [s["podCounts"]["universal"]] * len(names)
        out.update(zip(names, counts, strict=True))
    return out


def test_simulate_prints_topology_assignments_in_workload_status_shape() -> None:
    wls = _by_job(simulate_json(*FILES, "--cycles", "5"))
    a, b = _hosts(wls["rack-a"]), _hosts(wls["rack-b"])
    assert wls["rack-a"]["podSets"][0]["topologyAssignment"]["levels"] == [
        "kubernetes.io/hostname"
    ]
    rack = lambda host: host.rsplit("-", 1)[0]  # noqa: E731
    assert sum(a.values()) == 4 and len({rack(h) for h in a}) == 1
    assert sum(b.values()) == 4 and len({rack(h) for h in b}) == 1
    assert {rack(h) for h in a} != {rack(h) for h in b}
    # The pod kqueue does not manage leaves 1 cpu on b1-r1-n1: no 2-cpu pod goes there.
    block = _hosts(wls["block-wide"])
    assert sum(block.values()) == 20 and "b1-r1-n1" not in block
    assert {h.split("-")[0] for h in block} == {"b1", "b2"}  # too big for one block: spread
    big = wls["rack-too-big"]
    assert big["state"] == "Pending"
    assert "topologyAssignment" not in big["podSets"][0]


def test_kueue_topology_and_flavor_are_read() -> None:
    docs = list(yaml.safe_load_all((EXAMPLE / "cluster.yaml").read_text()))
    for d in docs:
        if d["kind"] in ("Topology", "ResourceFlavor"):
            d["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    jobs = (EXAMPLE / "jobs.yaml").read_text()
    text = yaml.safe_dump_all(docs) + "---\n" + (EXAMPLE / "nodes.yaml").read_text()
    text += "---\n" + jobs
    out = simulate_json("-", "--cycles", "5", input=text)
    wls = _by_job(out)
    assert sum(_hosts(wls["rack-a"]).values()) == 4


def test_explain_shows_domains_considered() -> None:
    result = run_cli("explain", "default/rack-too-big", *(a for f in FILES for a in ("-f", f)))
    assert result.exit_code == 0, result.stdout + result.stderr
    text = result.stdout
    assert f"domains of level {RACK} considered (5 pods needed in one):" in text
    assert "b1-r1: fits 2, 3 short" in text
    result = run_cli("explain", "default/rack-too-big", "-o", "json",
                     *(a for f in FILES for a in ("-f", f)))
    topo = json.loads(result.stdout)["pending"]["podSets"][0]["topology"]
    assert topo["level"] == RACK and topo["needed"] == 5
    assert {d["name"]: d["fits"] for d in topo["domains"]} == {
        "b1-r1": 2, "b1-r2": 0, "b2-r1": 0, "b2-r2": 0
    }


def test_the_topology_sample_places_its_job_in_one_local_cluster_rack() -> None:
    from kqueue.localcluster.nodes import TAS_RACK_LABEL, TOPOLOGY_NODES

    nodes = []
    for n in TOPOLOGY_NODES:
        m = n.manifest()
        m["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # kwok's node stage
        nodes.append(m)
    sample = Path(__file__).resolve().parents[2] / "config" / "samples" / "topology.yaml"
    text = sample.read_text() + "---\n" + yaml.safe_dump_all(nodes)
    out = simulate_json("-", "--cycles", "2", input=text)
    (entry,) = out["workloads"].values()
    assert entry["state"] == "Admitted"
    hosts = _hosts(entry)
    racks = {n.name: n.labels[TAS_RACK_LABEL] for n in TOPOLOGY_NODES}
    assert sum(hosts.values()) == 4 and len({racks[h] for h in hosts}) == 1


MULTI_LAYER_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: layered
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  parallelism: 8
  completions: 8
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.example.com/block
        kueue.x-k8s.io/podset-slice-required-topology-constraints: >-
          [{"topology": "cloud.example.com/rack", "size": 4},
           {"topology": "kubernetes.io/hostname", "size": 2}]
    spec:
      restartPolicy: Never
      containers:
      - {name: worker, image: registry.example.com/train, resources: {requests: {cpu: "2"}}}
"""


def test_kueue_multi_layer_slices_are_placed_in_whole_slices_per_layer() -> None:
    # Kueue's Job as written for Kueue: `kqueue convert` turns its label and annotations into
    # kqueue's, then simulate places it.
    converted = run_cli("convert", "-", input=MULTI_LAYER_JOB)
    assert converted.exit_code == 0, converted.stderr
    text = "---\n".join(
        (EXAMPLE / f).read_text() for f in ("cluster.yaml", "nodes.yaml")
    ) + "---\n" + converted.stdout
    wls = _by_job(simulate_json("-", "--cycles", "2", input=text))
    hosts = _hosts(wls["layered"])
    assert sum(hosts.values()) == 8
    assert len({h.split("-")[0] for h in hosts}) == 1  # one block
    per_rack: dict[str, int] = {}
    for h, n in hosts.items():
        assert n % 2 == 0, hosts  # whole host slices of 2
        per_rack[h.rsplit("-", 1)[0]] = per_rack.get(h.rsplit("-", 1)[0], 0) + n
    assert all(n % 4 == 0 for n in per_rack.values()), per_rack  # whole rack slices of 4
    assert "b1-r1-n1" not in hosts  # 1 cpu left by the foreign pod: no 2-cpu pod fits
