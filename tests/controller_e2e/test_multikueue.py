"""MultiKueue on real control planes (docs/multikueue.md): the session's cluster is the manager,
two more local clusters are its workers, each with its own kqueue. Kubeconfigs are Secrets in
the manager's kqueue namespace, pointing at the workers' loopback API servers.

worker1's ClusterQueue has 1 CPU, worker2's 4: a 2-CPU Job fits worker2 only. Tests that
change the shared setup (the dispatcher, a worker's API server) put it back when they end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME, ORIGIN_LABEL
from kqueue.cli.kubectl.main import cli as plugin
from kqueue.cli.main import cli as kqueue_cli
from kqueue.controller.kube import Kube, KubeError, NotFound
from kqueue.controller.resources import (
    ADMISSION_CHECKS,
    JOBS,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    NAMESPACES,
    PODS,
    SECRETS,
    WORKLOADS,
)
from kqueue.localcluster import multikueue as mk
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION
from tests.controller_e2e.harness import (
    KQUEUE_NAMESPACE,
    Api,
    KqueueProcess,
    condition,
    eventually,
    is_true,
    job,
    kqueue_running,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import gated, pod
from tests.fixtures.cluster import gang_cluster

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
CHECK = "mk-check"
CONFIG = "mk-config"
FLAVOR = "mk-default"
CQ = "mk-cq"
QUEUE = "mk-q"
WORKERS = ("worker1", "worker2")
WORKER_CPU = {"worker1": "1", "worker2": "4"}
LOST_TIMEOUT_S = 10
MANAGER_MK = {"gcInterval": "3s", "workerLostTimeout": f"{LOST_TIMEOUT_S}s"}
STARTED = time.monotonic()


@dataclass
class ManagerProcess(KqueueProcess):
    """The manager's kqueue, with its Configuration's multiKueue section."""

    multi_kueue: dict[str, Any] = field(default_factory=lambda: dict(MANAGER_MK))

    def config_yaml(self) -> str:
        cfg = yaml.safe_load(super().config_yaml())
        cfg["multiKueue"] = self.multi_kueue
        return str(yaml.safe_dump(cfg))

    def reconfigure(self, multi_kueue: dict[str, Any]) -> None:
        self.multi_kueue = multi_kueue
        (self.work_dir / "config.yaml").write_text(self.config_yaml())
        self.restart()


@dataclass
class Worker:
    name: str
    cluster: LocalCluster
    kqueue: KqueueProcess


def _worker(name: str, tmp: pytest.TempPathFactory) -> Iterator[Worker]:
    for lc in gang_cluster(f"MultiKueue {name}"):
        proc = KqueueProcess(cluster=lc, work_dir=Path(tmp.mktemp(f"kqueue-{name}")))
        for running in kqueue_running(proc):
            yield Worker(name, lc, running)


@pytest.fixture(scope="module")
def worker1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    yield from _worker("worker1", tmp_path_factory)


@pytest.fixture(scope="module")
def worker2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    yield from _worker("worker2", tmp_path_factory)


@pytest.fixture(scope="module")
def manager(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagerProcess]:
    proc = ManagerProcess(cluster=cluster, work_dir=Path(tmp_path_factory.mktemp("kqueue-manager")))
    yield from kqueue_running(proc)
    print(f"\nMultiKueue module: {time.monotonic() - STARTED:.0f}s with cluster starts")


def secret(name: str, data: dict[str, str]) -> Obj:
    return mk.secret(name, KQUEUE_NAMESPACE, data)


mk_cluster = mk.multikueue_cluster
mk_config = mk.multikueue_config
mk_check = mk.multikueue_check


async def _create(kube: Kube, resource: Any, obj: Obj) -> None:
    try:
        await kube.create(resource, obj, namespace=obj["metadata"].get("namespace"))
    except KubeError as exc:
        if exc.status != 409:
            raise


@dataclass
class Setup:
    manager: Kube
    workers: dict[str, Kube]
    procs: dict[str, Worker]
    manager_proc: ManagerProcess


def _apply(lc: LocalCluster, objs: list[Obj]) -> None:
    lc.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objs))


def install(manager: ManagerProcess, workers: list[Worker]) -> dict[str, Worker]:
    """The shared setup: on the manager the Secrets, MultiKueueClusters, MultiKueueConfig (of
    ``workers``), check and ClusterQueue; on each worker its flavor and ClusterQueue."""
    for w in workers:
        _apply(w.cluster, mk.queue_objects(FLAVOR, CQ, WORKER_CPU[w.name], []))
    mgr = mk.manager_objects({w.name: w.cluster.kubeconfig_path for w in workers},
                             KQUEUE_NAMESPACE, config=CONFIG, check=CHECK)
    _apply(manager.cluster, mgr + mk.queue_objects(FLAVOR, CQ, "8", [CHECK]))
    return {w.name: w for w in workers}


@pytest.fixture(scope="module")
def objects(manager: ManagerProcess, worker1: Worker, worker2: Worker) -> dict[str, Worker]:
    return install(manager, [worker1, worker2])


@pytest.fixture
async def setup(manager: ManagerProcess, objects: dict[str, Worker]) -> AsyncIterator[Setup]:
    from kubernetes_asyncio import config

    clients = []
    kubes: dict[str, Kube] = {}
    for name, lc in [("manager", manager.cluster)] + [(n, w.cluster) for n, w in objects.items()]:
        api = await config.new_client_from_config(config_file=str(lc.kubeconfig_path))
        clients.append(api)
        kubes[name] = Kube(api)
    mkube = kubes.pop("manager")
    try:
        yield Setup(mkube, kubes, objects, manager)
    finally:
        for api in clients:
            await api.close()


@pytest.fixture
async def ns(setup: Setup, namespace: str) -> AsyncIterator[str]:
    """The test's namespace, with the LocalQueue, on the manager and on both workers."""
    lq = mk.local_queue(QUEUE, namespace, CQ)
    for kube in setup.workers.values():
        await _create(kube, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})
        await _create(kube, LOCAL_QUEUES, lq)
    await _create(setup.manager, LOCAL_QUEUES, lq)
    yield namespace
    for kube in setup.workers.values():
        with contextlib.suppress(KubeError):
            await kube.delete(NAMESPACES, namespace)


def mk_job(name: str, namespace: str, *, cpu: str = "1", complete_after: str = "4s") -> Obj:
    j = job(name, namespace, QUEUE, cpu=cpu, complete_after=complete_after)
    j["spec"]["managedBy"] = CONTROLLER_NAME
    return j


async def _cli(command: click.Command, *args: str) -> str:
    """A kqueue command in-process (its own event loop, in a thread); its output."""
    result = await asyncio.to_thread(lambda: CliRunner().invoke(command, list(args)))
    assert result.exit_code == 0, f"{' '.join(args)}:\n{result.output}"
    return result.stdout


async def _workload(kube: Kube, namespace: str, job_name: str) -> Obj | None:
    return await Api(kube).workload_of(namespace, job_name)


async def _get(kube: Kube, resource: Any, name: str, namespace: str | None = None) -> Obj | None:
    try:
        return await kube.get(resource, name, namespace)
    except NotFound:
        return None
    except KubeError:
        return None


async def _active(setup: Setup) -> None:
    async def check_active() -> bool:
        ac = await _get(setup.manager, ADMISSION_CHECKS, CHECK)
        return ac is not None and is_true(ac, "Active")

    await eventually(check_active, within=60, what="the MultiKueue check to be Active")


async def test_one_job_runs_on_a_worker_and_the_manager_status_matches(setup: Setup, ns: str) -> None:
    await _active(setup)
    name = unique("one")
    # Created without managedBy: the Job webhook sets it (the ClusterQueue has the MultiKueue
    # check, kqueue/controller/webhooks/multikueue.py).
    plain = job(name, ns, QUEUE, complete_after="4s")
    assert "managedBy" not in plain["spec"]
    created = await setup.manager.create(JOBS, plain, namespace=ns)
    assert created["spec"]["managedBy"] == CONTROLLER_NAME

    async def finished() -> Obj | None:
        wl = await _workload(setup.manager, ns, name)
        return wl if wl is not None and is_true(wl, c.FINISHED) else None

    wl = await eventually(finished, within=90, what="the manager's Workload to finish")
    winner = (wl.get("status") or {}).get("clusterName")
    assert winner in WORKERS
    assert condition(wl, c.FINISHED)["reason"] == "Succeeded"  # type: ignore[index]
    assert not (wl.get("status") or {}).get("nominatedClusterNames")
    local = await setup.manager.get(JOBS, name, ns)
    assert local["status"].get("succeeded") == 1
    assert any(cd["type"] == "Complete" and cd["status"] == "True"
               for cd in local["status"].get("conditions") or [])
    # No pod ran on the manager: the Job is managed by MultiKueue.
    assert not local["status"].get("active")
    proc = setup.manager_proc
    wide = proc.cluster.kubectl("get", "workloads.kqueue.io", "-n", ns, "-o", "wide").stdout
    assert "CLUSTER" in wide.splitlines()[0] and winner in wide, wide
    # kubectl kqueue list -o wide and kqueue explain name the worker too.
    kubeconfig = str(proc.cluster.kubeconfig_path)
    listed = await _cli(plugin, "list", "workloads", "-n", ns, "-o", "wide",
                        "--kubeconfig", kubeconfig)
    row = next(ln for ln in listed.splitlines() if ln.startswith(wl["metadata"]["name"]))
    assert f" {winner} " in row, listed
    explained = await _cli(kqueue_cli, "explain", f"{ns}/{name}", "--kubeconfig", kubeconfig)
    assert f"MultiKueue: ran on worker cluster {winner}" in explained.splitlines(), explained
    assert proc.metric("kqueue_multikueue_workloads_admitted_total", cluster_queue=CQ,
                       cluster=winner) >= 1
    assert proc.metric("kqueue_multikueue_workloads_dispatched_total", cluster_queue=CQ,
                       cluster=winner) >= 1

    async def remote_gone() -> bool:
        return (await _get(setup.workers[winner], WORKLOADS, wl["metadata"]["name"], ns) is None
                and await _get(setup.workers[winner], JOBS, name, ns) is None)

    await eventually(remote_gone, within=30, what=f"the copies on {winner} to be deleted")


async def test_a_full_worker_is_passed_over(setup: Setup, ns: str) -> None:
    await _active(setup)
    name = unique("big")
    # 2 CPUs: worker1 has 1 (its copy stays pending there), worker2 has 4.
    await setup.manager.create(JOBS, mk_job(name, ns, cpu="2", complete_after="30s"), namespace=ns)

    async def placed() -> Obj | None:
        wl = await _workload(setup.manager, ns, name)
        return wl if wl is not None and (wl.get("status") or {}).get("clusterName") else None

    wl = await eventually(placed, within=90, what="the Workload to be placed on a worker")
    assert wl["status"]["clusterName"] == "worker2"
    remote = await eventually(
        lambda: _get(setup.workers["worker2"], JOBS, name, ns), within=30,
        what="the Job on worker2",
    )
    assert (remote["metadata"]["labels"] or {}).get(c.PREBUILT_WORKLOAD_LABEL) == wl["metadata"]["name"]
    assert "managedBy" not in remote["spec"]

    async def worker1_copy_gone() -> bool:
        return await _get(setup.workers["worker1"], WORKLOADS, wl["metadata"]["name"], ns) is None

    await eventually(worker1_copy_gone, within=30, what="worker1's copy to be removed")
    await setup.manager.delete(JOBS, name, namespace=ns)


async def test_bad_kubeconfig_secrets_make_the_cluster_inactive_naming_the_problem(
    setup: Setup,
) -> None:
    await _active(setup)
    kube = setup.manager
    base = unique("bad")
    cases = {
        f"{base}-missing": (None, "BadKubeConfig", f"Secret {KQUEUE_NAMESPACE}/{base}-missing-s"),
        f"{base}-nokey": ({"config": "x"}, "BadKubeConfig", "has no key 'kubeconfig'"),
        f"{base}-garbage": ({"kubeconfig": "just: text"}, "BadKubeConfig", "not a kubeconfig"),
        f"{base}-nowhere": (
            {"kubeconfig": yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config", "current-context": "x",
                "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1",
                                                       "insecure-skip-tls-verify": True}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
            })},
            "ClientConnectionFailed", "worker cluster",
        ),
    }
    try:
        for name, (data, _, _) in cases.items():
            if data is not None:
                await kube.create(SECRETS, secret(f"{name}-s", data), namespace=KQUEUE_NAMESPACE)
            await kube.create(MULTIKUEUE_CLUSTERS, mk_cluster(name, f"{name}-s"))
        for name, (_, reason, needle) in cases.items():
            async def inactive(name: str = name) -> Obj | None:
                mkc = await _get(kube, MULTIKUEUE_CLUSTERS, name)
                cond = condition(mkc, "Active") if mkc else None
                return cond if cond is not None and cond["status"] == "False" else None

            cond = await eventually(inactive, within=30, what=f"{name} Active=False")
            assert cond["reason"] == reason, cond
            assert needle in cond["message"], cond
        # A config naming only clusters that do not exist (or are inactive): its check is
        # inactive, naming them, and so is a ClusterQueue that uses it.
        ghost_cfg, ghost_check = f"{base}-cfg", f"{base}-check"
        await kube.create(MULTIKUEUE_CONFIGS, mk_config(ghost_cfg, ["ghost", f"{base}-missing"]))
        await kube.create(ADMISSION_CHECKS, mk_check(ghost_check, ghost_cfg))

        async def check_inactive() -> Obj | None:
            ac = await _get(kube, ADMISSION_CHECKS, ghost_check)
            cond = condition(ac, "Active") if ac else None
            return cond if cond is not None and cond["status"] == "False" else None

        cond = await eventually(check_inactive, within=30, what="the check to be inactive")
        assert cond["reason"] == "NoUsableClusters"
        assert "Missing clusters: [ghost]" in cond["message"]
        assert f"Inactive clusters: [{base}-missing]" in cond["message"]
    finally:
        for name in cases:
            for resource, obj_name, obj_ns in ((MULTIKUEUE_CLUSTERS, name, None),
                                               (SECRETS, f"{name}-s", KQUEUE_NAMESPACE)):
                with contextlib.suppress(KubeError):
                    await kube.delete(resource, obj_name, namespace=obj_ns)
        for resource, obj_name in ((ADMISSION_CHECKS, f"{base}-check"),
                                   (MULTIKUEUE_CONFIGS, f"{base}-cfg")):
            with contextlib.suppress(KubeError):
                await kube.delete(resource, obj_name)


async def test_incremental_dispatcher_nominates_in_config_order(setup: Setup, ns: str) -> None:
    # One cluster per round, rounds of 8s, config order worker1 then worker2: a 2-CPU Job is
    # offered to worker1 alone first (which cannot take it), then to worker2 too.
    setup.manager_proc.reconfigure({
        **MANAGER_MK,
        "dispatcherName": "kqueue.io/multikueue-dispatcher-incremental",
        "incrementalDispatcherConfig": {"stepSize": 1, "roundTimeout": "8s"},
    })
    try:
        await _active(setup)
        name = unique("inc")
        await setup.manager.create(JOBS, mk_job(name, ns, cpu="2", complete_after="30s"), namespace=ns)

        async def nominated() -> Obj | None:
            wl = await _workload(setup.manager, ns, name)
            return wl if wl is not None and (wl.get("status") or {}).get("nominatedClusterNames") else None

        wl = await eventually(nominated, within=60, what="a nomination")
        assert wl["status"]["nominatedClusterNames"] == ["worker1"]
        wl_name = wl["metadata"]["name"]

        async def only_worker1() -> bool:
            return await _get(setup.workers["worker2"], WORKLOADS, wl_name, ns) is None

        await stays(only_worker1, for_s=4, what="worker2 to have no copy in the first round")

        async def placed() -> Obj | None:
            w = await _workload(setup.manager, ns, name)
            return w if w is not None and (w.get("status") or {}).get("clusterName") else None

        wl = await eventually(placed, within=60, what="the second round to place it")
        assert wl["status"]["clusterName"] == "worker2"
        await setup.manager.delete(JOBS, name, namespace=ns)
    finally:
        setup.manager_proc.reconfigure(dict(MANAGER_MK))


# timing-bound (a worker lost, with deadlines): one worker, with the machine to itself
# (hack/test-phases.sh)
@pytest.mark.serial
async def test_worker_lost_requeues_elsewhere_and_its_orphans_are_removed(
    setup: Setup, ns: str
) -> None:
    await _active(setup)
    name = unique("lost")
    await setup.manager.create(JOBS, mk_job(name, ns, complete_after="40s"), namespace=ns)

    async def placed() -> Obj | None:
        wl = await _workload(setup.manager, ns, name)
        return wl if wl is not None and (wl.get("status") or {}).get("clusterName") else None

    wl = await eventually(placed, within=90, what="the Workload to be placed")
    lost = wl["status"]["clusterName"]
    other = next(w for w in WORKERS if w != lost)
    await eventually(lambda: _get(setup.workers[lost], JOBS, name, ns), within=30,
                     what=f"the Job on {lost}")
    lost_cluster = setup.procs[lost].cluster
    lost_cluster.stop_component("kube-apiserver")
    try:
        async def inactive() -> bool:
            mkc = await _get(setup.manager, MULTIKUEUE_CLUSTERS, lost)
            cond = condition(mkc, "Active") if mkc else None
            return cond is not None and cond["status"] == "False"

        await eventually(inactive, within=30, what=f"{lost} Active=False")

        async def moved() -> Obj | None:
            w = await _workload(setup.manager, ns, name)
            return w if w is not None and (w.get("status") or {}).get("clusterName") == other else None

        await eventually(moved, within=LOST_TIMEOUT_S + 150, what=f"the Workload to move to {other}")
    finally:
        lost_cluster.start_component("kube-apiserver")

    async def orphans_gone() -> bool:
        return (await _get(setup.workers[lost], WORKLOADS, wl["metadata"]["name"], ns) is None
                and await _get(setup.workers[lost], JOBS, name, ns) is None)

    await eventually(orphans_gone, within=60, what=f"the orphans on {lost} to be removed")

    async def finished() -> Obj | None:
        w = await _workload(setup.manager, ns, name)
        return w if w is not None and is_true(w, c.FINISHED) else None

    done = await eventually(finished, within=90, what="the Workload to finish on the other worker")
    assert done["status"]["clusterName"] == other



@pytest.mark.serial  # timing-bound too: kqueue restarted, with deadlines
async def test_restarts_of_the_manager_and_of_a_workers_kqueue_lose_nothing(
    setup: Setup, ns: str
) -> None:
    await _active(setup)
    name = unique("restart")
    await setup.manager.create(JOBS, mk_job(name, ns, complete_after="90s"), namespace=ns)

    async def placed() -> Obj | None:
        wl = await _workload(setup.manager, ns, name)
        return wl if wl is not None and (wl.get("status") or {}).get("clusterName") else None

    wl = await eventually(placed, within=90, what="the Workload to be placed")
    winner = wl["status"]["clusterName"]
    remote = await eventually(lambda: _get(setup.workers[winner], JOBS, name, ns), within=30,
                              what=f"the Job on {winner}")
    setup.manager_proc.restart(kill=True)
    setup.procs[winner].kqueue.restart(kill=True)
    # The same copy runs on: not made again on the winner, none on the other worker. On a
    # loaded machine the two restarts can outlast the Job's run, and the finished copy is then
    # already gone from the winner: only a finished Workload on the manager excuses that.
    again = await _get(setup.workers[winner], JOBS, name, ns)
    if again is None:
        gone = await _workload(setup.manager, ns, name)
        assert gone is not None and is_true(gone, c.FINISHED), (
            f"the Job left {winner} while its Workload on the manager had not finished"
        )
    else:
        assert again["metadata"]["uid"] == remote["metadata"]["uid"]
    other = next(w for w in WORKERS if w != winner)
    assert await _get(setup.workers[other], WORKLOADS, wl["metadata"]["name"], ns) is None

    async def finished() -> Obj | None:
        w = await _workload(setup.manager, ns, name)
        return w if w is not None and is_true(w, c.FINISHED) else None

    done = await eventually(finished, within=120, what="the Workload to finish after restarts")
    assert done["status"]["clusterName"] == winner
    assert condition(done, c.FINISHED)["reason"] == "Succeeded"  # type: ignore[index]
    local = await setup.manager.get(JOBS, name, ns)
    assert local["status"].get("succeeded") == 1


# Plain pods (kqueue/controller/integrations/pod/multikueue.py): a single pod and a pod group
# created on the manager stay gated there; their copies run on a worker and finish, the
# manager's pods show the copies' status (Running, then Succeeded), the manager's Workload
# finishes and the copies go. In this module, not their own, so that no second pair of
# workers is started for them.

async def _pods(kube: Kube, namespace: str, names: list[str]) -> list[Obj] | None:
    found = [await _get(kube, PODS, n, namespace) for n in names]
    return None if any(p is None for p in found) else found  # type: ignore[return-value]


async def _dispatched(clusters: Setup, namespace: str, names: list[str]) -> None:
    """Pods ``names`` on the manager run on the worker and finish there; the manager's pods
    never leave the gate, show the copies' status, and the copies go at the end."""
    mgr = clusters.manager

    async def placed() -> Obj | None:
        wl = await Api(mgr).workload_of(namespace, names[0], kind="Pod")
        return wl if wl is not None and (wl.get("status") or {}).get("clusterName") else None

    wl = await eventually(placed, within=90, what="the Workload to be placed on a worker")
    worker = wl["status"]["clusterName"]
    remote = clusters.workers[worker]
    wl_name = wl["metadata"]["name"]
    copies = await eventually(lambda: _pods(remote, namespace, names), within=30,
                              what="the copies on the worker")
    for p in copies:
        labels = p["metadata"]["labels"]
        assert labels[c.PREBUILT_WORKLOAD_LABEL] == wl_name and ORIGIN_LABEL in labels

    async def running_there() -> list[Obj] | None:
        here = await _pods(mgr, namespace, names)
        ok = here is not None and all(
            (p.get("status") or {}).get("phase") in ("Running", "Succeeded") for p in here
        )
        return here if ok else None

    # The manager's pods follow their copies' status, but stay behind the gate.
    for p in await eventually(running_there, within=60, what="the manager's pods Running"):
        assert gated(p) and not p["spec"].get("nodeName"), p["spec"]

    async def finished() -> Obj | None:
        w = await _get(mgr, WORKLOADS, wl_name, namespace)
        return w if w is not None and is_true(w, c.FINISHED) else None

    done = await eventually(finished, within=90, what="the manager's Workload to finish")
    assert condition(done, c.FINISHED)["reason"] == "Succeeded"  # type: ignore[index]
    assert done["status"]["clusterName"] == worker
    here = await _pods(mgr, namespace, names)
    assert here is not None
    for p in here:
        assert p["status"]["phase"] == "Succeeded", p["status"]
        assert gated(p) and not p["spec"].get("nodeName")

    async def copies_gone() -> bool:
        return (await _get(remote, WORKLOADS, wl_name, namespace) is None
                and all([await _get(remote, PODS, n, namespace) is None for n in names]))

    await eventually(copies_gone, within=60, what="the copies on the worker to be deleted")


async def test_a_single_pod_runs_on_the_worker_and_the_manager_follows(
    setup: Setup, ns: str
) -> None:
    await _active(setup)
    name = unique("solo")
    body = pod(name, ns, QUEUE, cpu="250m", annotations={COMPLETE_AFTER_ANNOTATION: "8s"})
    await setup.manager.create(PODS, body, namespace=ns)
    await _dispatched(setup, ns, [name])


async def test_a_pod_group_runs_on_the_worker_together(
    setup: Setup, ns: str
) -> None:
    await _active(setup)
    group = unique("grp")
    names = [f"{group}-{i}" for i in range(2)]
    for n in names:
        body = pod(n, ns, QUEUE, cpu="250m", group=group, total=2,
                   annotations={COMPLETE_AFTER_ANNOTATION: "8s"})
        await setup.manager.create(PODS, body, namespace=ns)
    await _dispatched(setup, ns, names)
