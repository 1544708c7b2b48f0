"""The topology hand-off on the local cluster: node selectors against a PodGroup constraint.

    python bench/topology_hand_off.py [--modes NodeSelector,NodeSelectorAndConstraint,Constraint]
        [--races 3] [--within 30] [--out bench/results/topology_hand_off.json]

A fresh local control plane (Kubernetes v1.37.2 unless KQUEUE_KUBERNETES_VERSION says
otherwise) with kube-scheduler's gang gates and ``TopologyAwareWorkloadScheduling`` on, and only
the kwok-tas nodes (2 blocks x 2 racks x 4 hosts of 4 cpu, kqueue/localcluster/nodes.py). One
``kqueue run`` per ``topologyHandOff`` mode (docs/topology.md), each against the same
Topology (block, rack, hostname), a topology-aware flavor and 64 cpu of quota. Jobs of 4 pods of
3 cpu require a rack (one pod per host: a whole rack). Per mode:

* **fill**: 4 such Jobs created at once (the cluster holds exactly 4): seconds from each Job's
  creation until all its pods are bound, and whether the rack kube-scheduler bound them in is
  the one kqueue assigned;
* **mixed**: 2 Jobs requiring a rack, then 2 of the same size *preferring* one (they may
  spread, so no mode gives them a constraint: they are pinned where kqueue's books say there
  is room): whether all 4 are bound, and where;
* **race** (``--races`` times, alone on the cluster): one Job; as soon as its Workload is
  admitted a pod kqueue does not manage is bound (``spec.nodeName``) to the first host of its
  assignment, taking 2 of its 4 cpu. That is the fragmentation kqueue cannot see in time (a pod
  bound by another scheduler, a DaemonSet) between its choice and kube-scheduler's binding.
  Whether all 4 pods are bound within ``--within`` seconds (with node selectors they are pinned
  to a rack that no longer holds them: none is bound), and when.

Prints and writes one JSON document: per mode the figures above, plus the run's commit and the
machine's load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config as kube_config  # noqa: E402

from bench.e2e_workloads import BenchKqueue, run_info  # noqa: E402
from kqueue.api.v1alpha1 import constants as c  # noqa: E402
from kqueue.controller.kube import Kube, NotFound  # noqa: E402
from kqueue.controller.resources import (  # noqa: E402
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kqueue.controller.topology import TOPOLOGIES  # noqa: E402
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402
from kqueue.localcluster.nodes import (  # noqa: E402
    TAS_BLOCK_LABEL,
    TAS_NODE_GROUP,
    TAS_NODE_GROUP_LABEL,
    TAS_RACK_LABEL,
    TOPOLOGY_NODES,
)
from tests.controller_e2e.harness import cluster_queue, install_crds, job, local_queue  # noqa: E402

Obj = dict[str, Any]
MODES = ("NodeSelector", "NodeSelectorAndConstraint", "Constraint")
TOLERATION = {"key": TAS_NODE_GROUP_LABEL, "operator": "Equal", "value": TAS_NODE_GROUP,
              "effect": "NoSchedule"}
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


@dataclass
class HandOffKqueue(BenchKqueue):
    hand_off: str = "NodeSelector"

    def config_yaml(self) -> str:
        doc = yaml.safe_load(super().config_yaml())
        doc["topologyHandOff"] = self.hand_off
        return yaml.safe_dump(doc)


def rack_job(name: str, namespace: str, how: str = "required") -> Obj:
    spec = job(name, namespace, "lq", count=4, cpu="3")
    spec["spec"]["template"]["metadata"]["annotations"][
        f"kqueue.io/podset-{how}-topology"
    ] = TAS_RACK_LABEL
    return spec


def hosts_of(wl: Obj) -> list[str]:
    """The hosts of the Workload's topology assignment (hostname level, first slice)."""
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    values = ta["slices"][0]["valuesPerLevel"][0]
    if "universal" in values:
        return [values["universal"]]
    ind = values["individual"]
    return [f"{ind.get('prefix', '')}{r}{ind.get('suffix', '')}" for r in ind["roots"]]


async def setup_queue(kube: Kube, namespace: str, suffix: str) -> None:
    topo, rf, cq = f"bench-topo-{suffix}", f"bench-tas-{suffix}", f"bench-cq-{suffix}"
    await kube.create(TOPOLOGIES, {
        "apiVersion": c.API_VERSION, "kind": "Topology", "metadata": {"name": topo},
        "spec": {"levels": [{"nodeLabel": TAS_BLOCK_LABEL}, {"nodeLabel": TAS_RACK_LABEL},
                            {"nodeLabel": "kubernetes.io/hostname"}]},
    })
    await kube.create(RESOURCE_FLAVORS, {
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": rf},
        "spec": {"nodeLabels": {TAS_NODE_GROUP_LABEL: TAS_NODE_GROUP}, "topologyName": topo,
                 "tolerations": [TOLERATION]},
    })
    await kube.create(CLUSTER_QUEUES,
                      cluster_queue(cq, [(rf, "64")]))
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": namespace}})
    await kube.create(LOCAL_QUEUES,
                      local_queue("lq", namespace, cq), namespace=namespace)


async def workload_of(kube: Kube, namespace: str, name: str) -> Obj | None:
    for wl in await kube.list(WORKLOADS, namespace=namespace):
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r.get("name") == name for r in refs):
            return wl
    return None


def admitted(wl: Obj | None) -> bool:
    return wl is not None and any(
        x.get("type") == c.ADMITTED and x.get("status") == "True"
        for x in (wl.get("status") or {}).get("conditions") or []
    )


async def bound_nodes(kube: Kube, namespace: str, name: str) -> list[str] | None:
    pods = await kube.list(PODS, namespace=namespace, label_selector=f"{JOB_NAME_LABEL}={name}")
    nodes = [str((p.get("spec") or {}).get("nodeName") or "") for p in pods]
    return nodes if len(nodes) == 4 and all(nodes) else None


async def outsider(kube: Kube, namespace: str, node: str) -> None:
    await kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "outsider", "namespace": namespace},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                 "tolerations": [TOLERATION],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}]},
    }, namespace=namespace)


async def clean(kube: Kube, namespace: str) -> None:
    for j in await kube.list(JOBS, namespace=namespace):
        with contextlib.suppress(NotFound):
            await kube.delete(JOBS, j["metadata"]["name"], namespace=namespace)
    for p in await kube.list(PODS, namespace=namespace):
        with contextlib.suppress(NotFound):
            await kube.delete(PODS, p["metadata"]["name"], namespace=namespace)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not await kube.list(PODS, namespace=namespace) and not await kube.list(
            WORKLOADS, namespace=namespace
        ):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"namespace {namespace} not empty after 120 s")


async def fill(
    kube: Kube, namespace: str, racks: dict[str, str], within: float,
    names: tuple[str, ...] = ("fill-0", "fill-1", "fill-2", "fill-3"), how: str = "required",
) -> Obj:
    start = time.monotonic()
    for name in names:
        await kube.create(JOBS, rack_job(name, namespace, how), namespace=namespace)
    done: dict[str, float] = {}
    agree: dict[str, bool] = {}
    bound_on: dict[str, list[str]] = {}
    while time.monotonic() - start < within and len(done) < len(names):
        for name in names:
            if name in done:
                continue
            nodes = await bound_nodes(kube, namespace, name)
            if nodes is None:
                continue
            done[name] = time.monotonic() - start
            bound_on[name] = nodes
            agree[name] = await books_agree(kube, namespace, name, nodes)
        await asyncio.sleep(0.2)
    times = sorted(done.values())
    # The books a few seconds later (topologyHandOff Constraint rewrites the assignment to
    # the hosts the pods are bound on once they all are).
    later = 0
    for name, nodes in bound_on.items():
        deadline = time.monotonic() + 10
        while not (ok := await books_agree(kube, namespace, name, nodes)):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        later += ok
    return {
        "jobsBound": len(done),
        "jobs": len(names),
        "secondsUntilAllBound": round(times[-1], 2) if len(done) == len(names) else None,
        "secondsPerJob": [round(t, 2) for t in times],
        "assignmentIsBoundHostsAtBinding": sum(agree.values()),
        "assignmentIsBoundHostsWithin10s": later,
    }


async def books_agree(kube: Kube, namespace: str, name: str, nodes: list[str]) -> bool:
    """Whether the Workload's topology assignment names exactly the hosts its pods are bound on."""
    wl = await workload_of(kube, namespace, name)
    return bool(wl and admitted(wl) and sorted(set(hosts_of(wl))) == sorted(set(nodes)))


async def mixed(kube: Kube, namespace: str, racks: dict[str, str], within: float) -> Obj:
    """2 Jobs requiring a rack, bound; then 2 preferring one (never given a constraint: they
    may spread, so they are pinned in every mode) go where kqueue's books say racks are free."""
    required = await fill(kube, namespace, racks, within, names=("req-0", "req-1"))
    preferred = await fill(kube, namespace, racks, within, names=("pref-0", "pref-1"),
                           how="preferred")
    return {"required": required, "preferred": preferred}


async def race(kube: Kube, namespace: str, racks: dict[str, str], within: float, i: int) -> Obj:
    name = f"race-{i}"
    start = time.monotonic()
    await kube.create(JOBS, rack_job(name, namespace), namespace=namespace)
    wl = None
    while not admitted(wl):
        if time.monotonic() - start > within:
            return {"admitted": False}
        wl = await workload_of(kube, namespace, name)
        await asyncio.sleep(0.05)
    assert wl is not None
    hosts = hosts_of(wl)
    await outsider(kube, namespace, hosts[0])
    raced_at = time.monotonic() - start
    # Whether the gang was bound before the outsider arrived (then the race was lost).
    early = await bound_nodes(kube, namespace, name)
    nodes = early
    while nodes is None and time.monotonic() - start < within:
        await asyncio.sleep(0.2)
        nodes = await bound_nodes(kube, namespace, name)
    return {
        "admitted": True,
        "outsiderAfterSeconds": round(raced_at, 2),
        "gangBoundBeforeOutsider": early is not None,
        "allBound": nodes is not None,
        "secondsUntilAllBound": round(time.monotonic() - start, 2) if nodes else None,
        "assignedRack": racks[hosts[0]],
        "boundRacks": sorted({racks[n] for n in nodes}) if nodes else [],
    }


async def one_mode(cluster: LocalCluster, mode: str, args: argparse.Namespace) -> Obj:
    assert cluster.work_dir is not None
    work = cluster.work_dir / f"kqueue-{mode}"
    work.mkdir(parents=True, exist_ok=True)
    kq = HandOffKqueue(cluster, work, hand_off=mode)
    kq.setup()
    await asyncio.to_thread(kq.start)
    api = await kube_config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    try:
        kube = Kube(api, timeout=60)
        racks = {n["metadata"]["name"]: n["metadata"]["labels"].get(TAS_RACK_LABEL, "")
                 for n in await kube.list(NODES)}
        namespace = f"hand-off-{mode.lower()}"
        await setup_queue(kube, namespace, mode.lower())
        out: Obj = {"fill": await fill(kube, namespace, racks, args.within)}
        await clean(kube, namespace)
        out["mixed"] = await mixed(kube, namespace, racks, args.within)
        await clean(kube, namespace)
        races = []
        for i in range(args.races):
            races.append(await race(kube, namespace, racks, args.within, i))
            await clean(kube, namespace)
        bound = [r["secondsUntilAllBound"] for r in races if r.get("allBound")]
        out["race"] = {
            "trials": races,
            "allBound": sum(1 for r in races if r.get("allBound")),
            "outsiderFirst": sum(1 for r in races if not r.get("gangBoundBeforeOutsider")),
            "medianSecondsUntilAllBound": round(statistics.median(bound), 2) if bound else None,
        }
        log = kq.log_path.read_text(errors="replace")
        out["handOffLog"] = [line for line in log.splitlines() if "topology hand-off" in line][:1]
        return out
    finally:
        await api.close()
        await asyncio.to_thread(kq.teardown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--races", type=int, default=3)
    parser.add_argument("--within", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/topology_hand_off.json")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            parser.error(f"--modes: {m!r} is not one of {', '.join(MODES)}")
    before = run_info()

    async def go() -> Obj:
        with LocalCluster(nodes=TOPOLOGY_NODES, gang_scheduling=True) as cluster:
            install_crds(cluster)
            result: Obj = {"kubernetes": cluster.kubernetes_version}
            for mode in modes:
                result[mode] = await one_mode(cluster, mode, args)
            return result

    result = {"run": before, **asyncio.run(go())}
    result["loadAverageAfter"] = run_info()["loadAverage"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
