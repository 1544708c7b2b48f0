"""The web view in headless Chromium against the real control plane, both ways it is served:
by ``kqueue run`` (``webView.bindAddress``) and by ``kqueue dashboard --kubeconfig``.

A cohort with two ClusterQueues; ``train`` and ``eval`` admitted in one of them, ``sweep`` and
``report`` pending behind them. The pages must show the tree with its usage bars, the pending
workloads with their positions and reasons, and a workload's explanation. Screenshots go to
``KQUEUE_SCREENSHOT_DIR`` when it is set (docs/img's pictures are made so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.chromium import Chromium, ensure_chromium, select
from tests.controller_e2e.harness import (
    ROOT,
    Api,
    KqueueProcess,
    after_second_of,
    cluster_queue,
    eventually,
    flavor,
    free_port,
    is_true,
    job,
    kqueue_running,
    local_queue,
    pending_reason,
    unique,
)

pytestmark = pytest.mark.cluster


@dataclass
class KqueueWithWebView(KqueueProcess):
    web_view_port: int = field(default_factory=free_port)

    def config_yaml(self) -> str:
        config = yaml.safe_load(super().config_yaml())
        config["webView"] = {"bindAddress": f"127.0.0.1:{self.web_view_port}"}
        return yaml.safe_dump(config)


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KqueueProcess]:
    proc = KqueueWithWebView(cluster=cluster, work_dir=Path(tmp_path_factory.mktemp("kqueue")))
    yield from kqueue_running(proc)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Chromium:
    return Chromium(ensure_chromium(), Path(tmp_path_factory.mktemp("chromium-profile")))


@pytest.fixture(scope="module")
def dashboard(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``kqueue dashboard --kubeconfig ...`` as a user runs it; yields its base URL."""
    port = free_port()
    log = Path(tmp_path_factory.mktemp("dashboard")) / "dashboard.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "kqueue", "dashboard",
                f"--kubeconfig={cluster.kubeconfig_path}",
                f"--address=127.0.0.1:{port}",
                "--refresh=0",
            ],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, log: Path | None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"kqueue dashboard exited {proc.returncode}: {log and log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url}/healthz never answered: {log and log.read_text()}")


@dataclass(frozen=True)
class Scene:
    namespace: str
    cohort: str
    busy: str  # ClusterQueue with the admitted and pending workloads
    idle: str
    rf: str


@pytest.fixture
async def scene(api: Api, namespace: str) -> Scene:
    rf, cohort = unique("rf"), unique("org")
    busy, idle = unique("cq-train"), unique("cq-infer")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(busy, [(rf, "2")], cohort=cohort, borrowing_limit="0"))
    await api.apply(cluster_queue(idle, [(rf, "1")], cohort=cohort))
    await api.apply(local_queue("team-queue", namespace, busy))
    for name in ("train", "eval"):
        await api.apply(job(name, namespace, "team-queue"))
        await api.wait_workload(
            namespace, name, lambda w: is_true(w, c.ADMITTED), what=f"{name} admitted"
        )
    for name in ("sweep", "report"):
        await api.apply(job(name, namespace, "team-queue"))
        pending = await api.wait_workload(
            namespace, name, lambda w: pending_reason(w) is not None, what=f"{name} pending"
        )
        # Creation times have a resolution of a second; within one the UID would decide the
        # order, so report comes a second after sweep.
        await after_second_of(pending["metadata"]["creationTimestamp"])
    return Scene(namespace, cohort, busy, idle, rf)


def _screenshot(chromium: Chromium, url: str, name: str, tmp_path: Path, height: int) -> None:
    shot = chromium.screenshot(url, tmp_path / name, height=height)
    target = os.environ.get("KQUEUE_SCREENSHOT_DIR")
    if target:
        shutil.copy(shot, Path(target) / name)


async def _check_pages(chromium: Chromium, base: str, s: Scene, api: Api) -> None:
    # The overview: the cohort with both ClusterQueues under it, usage bars, pending tables.
    dom = chromium.dump_dom(f"{base}/")
    [cohort] = select(dom, tag="li", cls="node", data_kind="Cohort", data_name=s.cohort)
    assert f"{s.busy}" in cohort.text and f"{s.idle}" in cohort.text
    [busy] = select(dom, tag="li", data_kind="ClusterQueue", data_name=s.busy)
    assert "2 pending · 2 admitted" in busy.text
    cpu = [
        b for b in select(dom, cls="bar", data_flavor=s.rf, data_resource="cpu")
        if b.attrs["data-nominal"] == "2"
    ]
    assert [b.attrs["data-used"] for b in cpu] == ["2"], cpu
    assert cpu[0].attrs["data-percent"] == "100"
    idle_bars = select(dom, cls="bar", data_flavor=s.rf, data_resource="cpu", data_nominal="1")
    assert any(b.attrs["data-used"] == "0" for b in idle_bars)
    # the cohort's subtree: 2 of 3 cpus reserved
    assert select(dom, cls="bar", data_flavor=s.rf, data_resource="cpu", data_nominal="3",
                  data_used="2")

    # The ClusterQueue's page: pending workloads in order with positions and reasons.
    dom = chromium.dump_dom(f"{base}/clusterqueues/{s.busy}")
    rows = select(dom, tag="tr", cls="pending-workload")
    wl = {r.attrs["data-workload"].rpartition("/")[2].split("-")[1]: r for r in rows}
    assert sorted(wl) == ["report", "sweep"], [r.attrs for r in rows]
    assert wl["sweep"].attrs["data-position"] == "0"
    assert wl["report"].attrs["data-position"] == "1"
    assert {r.attrs["data-reason"] for r in rows} == {"WaitingForQuota"}
    assert "insufficient unused quota for cpu" in wl["sweep"].text
    admitted = select(dom, tag="tr", cls="workload", data_status="Admitted")
    assert len(admitted) == 2

    # A workload's page: its explanation, as `kqueue explain` prints it.
    sweep = await api.workload_of(s.namespace, "sweep")
    assert sweep is not None
    name = sweep["metadata"]["name"]
    dom = chromium.dump_dom(f"{base}/workloads/{s.namespace}/{name}")
    [facts] = select(dom, tag="dl", id_="facts")
    assert facts.attrs["data-state"] == "Pending"
    [text] = select(dom, tag="pre", id_="explanation")
    assert f"Workload {s.namespace}/{name}: Pending" in text.text
    assert "reason: WaitingForQuota" in text.text
    assert f"ClusterQueue {s.busy}" in text.text

    # A Job's name finds its workload too; an unknown one says so with the closest name.
    dom = chromium.dump_dom(f"{base}/workloads/{s.namespace}/swep")
    [missing] = select(dom, id_="not-found")
    assert "not found" in missing.text and "sweep" in missing.text

    # The workloads list, and an unknown ClusterQueue named with the closest one.
    dom = chromium.dump_dom(f"{base}/workloads")
    statuses = {
        r.attrs["data-workload"].rpartition("/")[2].split("-")[1]: r.attrs["data-status"]
        for r in select(dom, tag="tr", cls="workload")
        if r.attrs["data-workload"].startswith(s.namespace + "/")
    }
    assert statuses == {
        "train": "Admitted", "eval": "Admitted", "sweep": "Pending", "report": "Pending"
    }
    dom = chromium.dump_dom(f"{base}/clusterqueues/{s.busy}x")
    assert "not found" in dom and s.busy in dom


async def test_web_view_served_by_kqueue(
    kqueue: KqueueWithWebView, chromium: Chromium, scene: Scene, api: Api, tmp_path: Path
) -> None:
    base = f"http://127.0.0.1:{kqueue.web_view_port}"
    _wait_healthy(base, None, None)
    await _check_pages(chromium, base, scene, api)
    _screenshot(chromium, f"{base}/", "web-view-queues.png", tmp_path, 900)
    _screenshot(chromium, f"{base}/clusterqueues/{scene.busy}", "web-view-clusterqueue.png",
                tmp_path, 700)
    sweep = await api.workload_of(scene.namespace, "sweep")
    assert sweep is not None
    _screenshot(
        chromium, f"{base}/workloads/{scene.namespace}/{sweep['metadata']['name']}",
        "web-view-workload.png", tmp_path, 600,
    )


async def test_kqueue_dashboard_command(
    dashboard: str, chromium: Chromium, scene: Scene, api: Api
) -> None:
    await _check_pages(chromium, dashboard, scene, api)


async def test_the_metrics_the_alerts_query_come_from_a_running_kqueue(
    kqueue: KqueueWithWebView, scene: Scene, api: Api
) -> None:
    """What the shipped alerts and dashboard read, from the real controller: it leads, its pod
    webhook answered the Jobs' pods, and the busy queue's oldest pending workload is sweep."""
    # (a label called "name": KqueueProcess.metric takes labels as keywords after the name)
    leader = [
        line for line in kqueue.metrics().splitlines()
        if line.startswith('kqueue_leader_election_master_status{name="kqueue-e2e"}')
    ]
    assert [line.rsplit(" ", 1)[1] for line in leader] == ["1.0"]
    assert kqueue.metric(
        "kqueue_webhook_requests_total", webhook="/mutate--v1-pod", result="allowed"
    ) >= 2
    assert kqueue.metric(
        "kqueue_webhook_request_duration_seconds_count", webhook="/mutate--v1-pod"
    ) >= 2
    sweep = await api.workload_of(scene.namespace, "sweep")
    assert sweep is not None
    created = datetime.fromisoformat(sweep["metadata"]["creationTimestamp"].replace("Z", "+00:00"))

    async def oldest_is_sweep() -> bool:
        value = kqueue.metric(
            "kqueue_oldest_pending_workload_timestamp_seconds", cluster_queue=scene.busy
        )
        return value == created.timestamp()

    await eventually(oldest_is_sweep, within=30, what="the oldest pending workload to be sweep")
