"""``kubectl kqueue`` against the real control plane with kqueue running.

The plugin runs in-process (its own event loop, in a thread) except in the discovery test,
where the real kubectl finds ``kubectl-kqueue`` on the PATH and runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kqueue.api.v1alpha1 import constants as c
from kqueue.cli.kubectl.main import cli as plugin
from kqueue.cli.main import cli as kqueue_cli
from kqueue.controller.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    ROOT,
    Api,
    after_second_of,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    pending_reason,
    priority_class,
    stays,
    unique,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


async def kq(cluster: LocalCluster, *args: str) -> Result:
    """``kubectl kqueue ARGS`` against the test cluster."""

    def run() -> Result:
        return CliRunner().invoke(
            plugin,
            [*args, "--kubeconfig", str(cluster.kubeconfig_path)],
            prog_name="kubectl-kqueue",
        )

    return await asyncio.to_thread(run)


async def ok(cluster: LocalCluster, *args: str) -> str:
    result = await kq(cluster, *args)
    assert result.exit_code == 0, f"kubectl kqueue {' '.join(args)}:\n{result.output}"
    return result.stdout


def table_rows(table: str) -> list[list[str]]:
    """A table's rows, cells cut at the header's column starts (a cell may hold spaces)."""
    lines = table.strip().splitlines()
    header = lines[0]
    # A column starts after three spaces (headers such as "CQ POSITION" hold single ones).
    starts = [0] + [
        i for i in range(3, len(header)) if header[i] != " " and header[i - 3 : i] == "   "
    ]
    return [
        [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line) + 1], strict=True)]
        for line in lines[1:]
    ]


def rows_of(table: str) -> dict[str, list[str]]:
    """Table rows by their first cell."""
    return {row[0]: row for row in table_rows(table)}


def header_of(table: str) -> list[str]:
    return [h.strip() for h in table.strip().splitlines()[0].split("   ") if h.strip()]


async def _admitted(api: Api, namespace: str, job_name: str) -> Obj:
    return await api.wait_workload(
        namespace, job_name, lambda w: is_true(w, c.ADMITTED), what=f"{job_name} admitted"
    )


async def _pending(api: Api, namespace: str, job_name: str) -> Obj:
    return await api.wait_workload(
        namespace, job_name, lambda w: pending_reason(w) is not None, what=f"{job_name} pending"
    )


async def test_list_shows_the_queues_and_workloads(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("running", namespace, "q"))
    running = await _admitted(api, namespace, "running")
    await api.apply(job("waiting", namespace, "q"))
    waiting = await _pending(api, namespace, "waiting")

    await _queue_counts(api, CLUSTER_QUEUES, cq, None, (1, 1))
    await _queue_counts(api, LOCAL_QUEUES, "q", namespace, (1, 1))
    out = await ok(cluster, "list", "workloads", "-n", namespace)
    assert header_of(out) == [
        "NAME",
        "QUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION",
        "REASON",
        "FLAVORS",
        "AGE",
        "ETA",
    ]
    rows = rows_of(out)
    assert rows[running["metadata"]["name"]][1:7] == ["q", cq, "ADMITTED", "", "", f"main:{rf}"]
    assert rows[waiting["metadata"]["name"]][1:6] == [
        "q",
        cq,
        "PENDING",
        "0",
        c.WAITING_FOR_QUOTA,
    ]

    wide = rows_of(await ok(cluster, "list", "wl", "-n", namespace, "-o", "wide"))
    assert wide[waiting["metadata"]["name"]][9:12] == ["0", "0", "job/waiting"]
    assert "insufficient unused quota for cpu" in wide[waiting["metadata"]["name"]][-1]

    everywhere = await ok(cluster, "list", "workloads", "-A", "--status", "pending")
    assert header_of(everywhere)[0] == "NAMESPACE"
    assert [r[1] for r in table_rows(everywhere) if r[0] == namespace] == [
        waiting["metadata"]["name"]
    ]

    # explain takes the Job's name in -n, as kqueue explain takes NAMESPACE/NAME.
    why = await ok(cluster, "explain", "waiting", "-n", namespace)
    assert why.startswith(f"Workload {namespace}/{waiting['metadata']['name']}: Pending")
    assert f"reason: {c.WAITING_FOR_QUOTA}" in why

    cqs = rows_of(await ok(cluster, "list", "clusterqueues"))
    assert cqs[cq][1:5] == ["", "1", "1", "True"]
    assert cqs[cq][5] == f"{rf}/cpu 1/1, {rf}/memory 64Mi/64Gi"

    lqs = rows_of(await ok(cluster, "list", "localqueues", "-n", namespace))
    assert lqs["q"][1:5] == [cq, "1", "1", "True"]

    rfs = rows_of(await ok(cluster, "list", "resourceflavors"))
    assert rfs[rf][1] == f"{INSTANCE_TYPE_LABEL}=on-demand"

    # -l goes to the API server; -o json prints a List of the objects themselves.
    listed = json.loads(
        await ok(cluster, "list", "cq", "-l", "e2e.kqueue.io/test=true", "-o", "json")
    )
    assert listed["kind"] == "List"
    assert cq in [i["metadata"]["name"] for i in listed["items"]]
    assert all(i["kind"] == "ClusterQueue" for i in listed["items"])
    none = await kq(cluster, "list", "cq", "-l", "e2e.kqueue.io/test=nothing")
    assert none.exit_code == 0 and none.stdout == ""
    assert "No clusterqueues found" in none.stderr


async def _dump(api: Api, namespace: str, rf: str, cq: str, wpc: str) -> list[Obj]:
    """The objects as ``kubectl get -o yaml`` gives them (list items get their kind back)."""
    docs = [
        await api.kube.get(RESOURCE_FLAVORS, rf),
        await api.kube.get(CLUSTER_QUEUES, cq),
        await api.kube.get(WORKLOAD_PRIORITY_CLASSES, wpc),
    ]
    for resource, kind in ((LOCAL_QUEUES, "LocalQueue"), (WORKLOADS, "Workload")):
        for item in await api.kube.list(resource, namespace=namespace):
            docs.append({**item, "apiVersion": c.API_VERSION, "kind": kind})
    return docs


async def _queue_counts(
    api: Api, resource: Any, name: str, ns: str | None, want: tuple[int, int]
) -> None:
    """Wait for kqueue to write (pending, admitted) counts into the queue's status."""

    async def probe() -> bool:
        st = (await api.kube.get(resource, name, ns)).get("status") or {}
        return (st.get("pendingWorkloads", 0), st.get("admittedWorkloads", 0)) == want

    await eventually(probe, what=f"{name} status counts {want}")


async def test_pending_positions_are_the_order_simulate_admits_in(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    rf, cq, wpc = unique("rf"), unique("cq"), unique("high")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(priority_class(wpc, 100))
    await api.apply(local_queue("a", namespace, cq))
    await api.apply(local_queue("b", namespace, cq))
    await api.apply(job("running", namespace, "a"))
    await _admitted(api, namespace, "running")
    # Creation order p1, p2, p3 (distinct seconds); p2 has the higher priority: p2, p1, p3.
    last = None
    for name, queue, labels in (
        ("p1", "a", None),
        ("p2", "b", {c.PRIORITY_CLASS_LABEL: wpc}),
        ("p3", "a", None),
    ):
        if last is not None:
            await after_second_of(last["metadata"]["creationTimestamp"])
        await api.apply(job(name, namespace, queue, labels=labels))
        last = await _pending(api, namespace, name)
    names = {
        j: (await api.workload_of(namespace, j) or {})["metadata"]["name"]
        for j in ("p1", "p2", "p3")
    }

    summary = json.loads(await ok(cluster, "pending", "clusterqueue", cq, "-o", "json"))
    assert summary["kind"] == "PendingWorkloadsSummary"
    got = [
        (
            i["metadata"]["name"],
            i["localQueueName"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
            i["priority"],
        )
        for i in summary["items"]
    ]
    assert got == [
        (names["p2"], "b", 0, 0, 100),
        (names["p1"], "a", 1, 0, 0),
        (names["p3"], "a", 2, 1, 0),
    ]
    assert all(i["reason"] == c.WAITING_FOR_QUOTA and i["message"] for i in summary["items"])

    table = rows_of(await ok(cluster, "pending", "lq", "a", "-n", namespace))
    assert [(r[0], r[1], r[3]) for r in table.values()] == [
        ("1", "0", names["p1"]),
        ("2", "1", names["p3"]),
    ]

    # The same objects through `kqueue simulate`, each workload running one minute once
    # admitted: after the running one finishes, they are admitted in their positions' order.
    docs = await _dump(api, namespace, rf, cq, wpc)
    for doc in docs:
        if doc["kind"] == "Workload":
            doc["metadata"].setdefault("annotations", {})["simulate.kqueue.io/run-time"] = "1m"
    result = await asyncio.to_thread(
        CliRunner().invoke,
        kqueue_cli,
        ["simulate", "-o", "json", "-"],
        input=yaml.safe_dump_all(docs),
    )
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    reserved = [e["workload"] for e in events if e["type"] == "QuotaReserved"]
    assert reserved == [f"{namespace}/{names[j]}" for j in ("p2", "p1", "p3")]


async def test_stop_holds_admission_until_resumed(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "4")]))
    await api.apply(local_queue("q", namespace, cq))

    dry = await ok(cluster, "stop", "clusterqueue", cq, "--dry-run")
    assert dry.splitlines() == [
        f"clusterqueue.kqueue.io/{cq} stopped (dry run)",
        f"PATCH /apis/kqueue.io/v1alpha1/clusterqueues/{cq} (application/merge-patch+json)",
        '{"spec":{"stopPolicy":"HoldAndDrain"}}',
    ]
    assert (await api.kube.get(CLUSTER_QUEUES, cq))["spec"].get("stopPolicy", "None") == "None"

    out = await ok(cluster, "stop", "cq", cq, "--keep-already-running")
    assert out.strip() == f"clusterqueue.kqueue.io/{cq} stopped"
    assert (await api.kube.get(CLUSTER_QUEUES, cq))["spec"]["stopPolicy"] == "Hold"

    async def inactive() -> bool:
        got = await api.kube.get(CLUSTER_QUEUES, cq)
        cond = next((x for x in got["status"].get("conditions", []) if x["type"] == c.ACTIVE), {})
        return cond.get("status") == "False"

    await eventually(inactive, what=f"ClusterQueue {cq} inactive")
    await api.apply(job("held", namespace, "q"))
    wl = await _pending(api, namespace, "held")

    async def not_admitted() -> bool:
        got = await api.workload_of(namespace, "held")
        return got is not None and not is_true(got, c.QUOTA_RESERVED)

    await stays(not_admitted, for_s=3, what="the Job's workload not admitted while stopped")
    rows = rows_of(await ok(cluster, "list", "workloads", "-n", namespace, "-o", "wide"))
    row = rows[wl["metadata"]["name"]]
    assert row[3:6] == ["PENDING", "0", "Suspended"]
    assert row[-1] == f"ClusterQueue {cq} is stopped"
    cqs = rows_of(await ok(cluster, "list", "clusterqueues", "-o", "wide"))
    assert cqs[cq][4] == "False"
    assert cqs[cq][-2:] == ["Hold", c.CLUSTER_QUEUE_ACTIVE_STOPPED]
    inactive_only = rows_of(await ok(cluster, "list", "clusterqueues", "--active", "false"))
    assert cq in inactive_only
    assert all(row[4] == "False" for row in inactive_only.values())

    out = await ok(cluster, "resume", "clusterqueue", cq)
    assert out.strip() == f"clusterqueue.kqueue.io/{cq} resumed"
    await _admitted(api, namespace, "held")
    again = await ok(cluster, "resume", "clusterqueue", cq)
    assert again.strip() == f"clusterqueue.kqueue.io/{cq} resumed (no change)"


async def test_stop_and_resume_a_workload(api: Api, cluster: LocalCluster, namespace: str) -> None:
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "2")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("j", namespace, "q"))
    name = (await _admitted(api, namespace, "j"))["metadata"]["name"]

    out = json.loads(await ok(cluster, "stop", "workload", name, "-n", namespace, "-o", "json"))
    assert out["spec"]["active"] is False
    await api.wait_workload(
        namespace, "j", lambda w: not is_true(w, c.QUOTA_RESERVED), what="j evicted"
    )
    rows = rows_of(await ok(cluster, "list", "workloads", "-n", namespace))
    assert rows[name][3] == "PENDING"
    await ok(cluster, "resume", "wl", name, "-n", namespace)
    await _admitted(api, namespace, "j")


async def test_create_queues_and_flavor_from_flags(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    rf, cq = unique("rf"), unique("cq")
    api.created += [(CLUSTER_QUEUES, cq, None), (RESOURCE_FLAVORS, rf, None)]
    out = await ok(
        cluster,
        "create",
        "resourceflavor",
        rf,
        "--node-labels",
        f"{INSTANCE_TYPE_LABEL}=on-demand",
    )
    assert out.strip() == f"resourceflavor.kqueue.io/{rf} created"
    await ok(
        cluster,
        "create",
        "clusterqueue",
        cq,
        "--cohort",
        unique("org"),
        "--nominal-quota",
        f"{rf}:cpu=2;memory=4Gi",
    )
    got = await api.kube.get(CLUSTER_QUEUES, cq)
    assert got["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "2"},
        {"name": "memory", "nominalQuota": "4Gi"},
    ]
    await ok(cluster, "create", "localqueue", "q", "-c", cq, "-n", namespace)
    await api.apply(job("j", namespace, "q", cpu="2"))
    wl = await _admitted(api, namespace, "j")
    assert wl["status"]["admission"]["clusterQueue"] == cq

    again = await kq(cluster, "create", "localqueue", "q", "-c", cq, "-n", namespace)
    assert again.exit_code == 1
    assert f'LocalQueue "q" already exists in namespace {namespace}' in again.stderr


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(
            ("pending", "clusterqueue", "no-such-cq"),
            'ClusterQueue "no-such-cq" not found (existing: ',
            id="pending: unknown ClusterQueue",
        ),
        pytest.param(
            ("pending", "localqueue", "no-such-lq"),
            'LocalQueue "no-such-lq" not found in namespace {ns} (existing: q, user-queue)',
            id="pending: unknown LocalQueue",
        ),
        pytest.param(
            ("pending", "localqueue", "user-qeue"),
            'LocalQueue "user-qeue" not found in namespace {ns}; did you mean "user-queue"?',
            id="pending: a LocalQueue name with a typo",
        ),
        pytest.param(
            ("stop", "localqueue", "no-such-lq"),
            'LocalQueue "no-such-lq" not found in namespace {ns} (existing: q, user-queue)',
            id="stop: unknown LocalQueue",
        ),
        pytest.param(
            ("create", "localqueue", "other", "-c", "no-such-cq"),
            'ClusterQueue "no-such-cq" not found',
            id="create: LocalQueue of an unknown ClusterQueue",
        ),
    ],
)
async def test_unknown_queue_is_named(
    api: Api, cluster: LocalCluster, namespace: str, args: tuple[str, ...], want: str
) -> None:
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(local_queue("user-queue", namespace, cq))
    result = await kq(cluster, *args, "-n", namespace)
    assert result.exit_code == 1, result.output
    assert want.format(ns=namespace) in result.stderr


def _plugin_dir(tmp_path: Path) -> Path:
    """``kubectl-kqueue`` and ``kubectl_complete-kqueue`` as installing the project makes them:
    the console scripts of pyproject.toml's [project.scripts], run by this interpreter."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("kubectl-kqueue", "kubectl_complete-kqueue"):
        module, _, func = scripts[name].partition(":")
        script = bin_dir / name
        script.write_text(
            f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n"
        )
        script.chmod(0o755)
    return bin_dir


async def test_kubectl_finds_and_runs_the_plugin(
    api: Api, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    assert cluster.bin_dir is not None
    env = {
        **os.environ,
        "PATH": f"{_plugin_dir(tmp_path)}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "KUBECONFIG": str(cluster.kubeconfig_path),
    }
    kubectl = str(cluster.bin_dir / "kubectl")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    listed = await asyncio.to_thread(run, "plugin", "list")
    assert "kubectl-kqueue" in listed.stdout, listed.stdout + listed.stderr
    result = await asyncio.to_thread(run, "kqueue", "list", "localqueues", "-n", namespace)
    assert result.returncode == 0, result.stderr
    assert rows_of(result.stdout)["q"][1] == cq
    version = await asyncio.to_thread(run, "kqueue", "version")
    assert version.stdout.startswith("Client Version: v")
    # kubectl's own completion asks the plugin's completion script.
    completed = await asyncio.to_thread(run, "__complete", "kqueue", "st")
    assert completed.stdout.splitlines()[0].startswith("stop"), completed.stdout + completed.stderr
    missing = await asyncio.to_thread(run, "kqueue", "pending", "cq", "no-such-cq")
    assert missing.returncode == 1
    assert 'ClusterQueue "no-such-cq" not found' in missing.stderr


def _kubeconfig_for(cluster: LocalCluster, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig for ServiceAccount ``sa``: the admin's cluster entry, the SA's token."""
    admin = yaml.safe_load(cluster.kubeconfig_path.read_text())
    token = cluster.kubectl("create", "token", sa, "-n", namespace).stdout.strip()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": sa,
                        "context": {
                            "cluster": admin["clusters"][0]["name"],
                            "user": sa,
                            "namespace": namespace,
                        },
                    }
                ],
                "current-context": sa,
            }
        )
    )
    return path


async def test_a_namespace_reader_lists_without_positions(
    api: Api, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """Positions need every kqueue object; a user who may read only their namespace's
    Workloads and LocalQueues still gets the list, with the reasons kqueue wrote."""
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("running", namespace, "q"))
    await _admitted(api, namespace, "running")
    await api.apply(job("waiting", namespace, "q"))
    waiting = await _pending(api, namespace, "waiting")

    def grant() -> Path:
        cluster.kubectl("create", "serviceaccount", "viewer", "-n", namespace)
        cluster.kubectl(
            "create",
            "role",
            "viewer",
            "-n",
            namespace,
            "--verb=get,list",
            "--resource=workloads.kqueue.io,localqueues.kqueue.io",
        )
        cluster.kubectl(
            "create",
            "rolebinding",
            "viewer",
            "-n",
            namespace,
            "--role=viewer",
            f"--serviceaccount={namespace}:viewer",
        )
        return _kubeconfig_for(cluster, namespace, "viewer", tmp_path / "viewer.kubeconfig")

    kubeconfig = await asyncio.to_thread(grant)

    def run(*args: str) -> Result:
        return CliRunner().invoke(
            plugin, [*args, "--kubeconfig", str(kubeconfig)], prog_name="kubectl-kqueue"
        )

    result = await asyncio.to_thread(run, "list", "workloads")
    assert result.exit_code == 0, result.output
    assert "warning: no positions: they need read access to every kqueue object" in result.stderr
    assert "403" in result.stderr
    row = rows_of(result.stdout)[waiting["metadata"]["name"]]
    # The ClusterQueue from the namespace's LocalQueue, the reason from the condition.
    assert row[1:6] == ["q", cq, "PENDING", "", c.WAITING_FOR_QUOTA]
    denied = await asyncio.to_thread(run, "pending", "localqueue", "q")
    assert denied.exit_code == 1
    assert "cannot read the cluster" in denied.stderr and "403" in denied.stderr
