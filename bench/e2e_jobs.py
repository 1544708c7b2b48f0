"""Jobs end to end: from Job creation to all pods released and bound, on the local cluster.

    python bench/e2e_jobs.py [--sizes 5,20,100] [--jobs 30] [--rate 10] [--qps 300 --burst 500]
        [--kcm-qps 100 --kcm-burst 200 --job-syncs 5] [--scheduler-qps 50 --scheduler-burst 100]

A fresh local control plane with kwok nodes large enough that nodes never limit (4 nodes of
1,000 pods and 1,000 cpu), one ClusterQueue with ample quota, and ``kqueue run`` (webhooks
included) as the controller, at kqueue's default client QPS/burst unless ``--qps/--burst`` say
otherwise. For each size, ``--jobs`` Jobs of that many pods are created at ``--rate`` per
second. The runner watches Workloads, Jobs and pods and records per Job, from its create
request, when each step was first seen: its Workload admitted, the Job resumed
(``spec.suspend: false``), all its pods created (by the Job controller), all released (no
scheduling gate left), all bound to a node; p50/p95/p99 per step, both from creation and from
the step before, and per pod the time from creation to release (kqueue) and from release to
binding (kube-scheduler). Per phase it also records the pod creation, release and binding
rates (mean and busiest second), the CPU seconds of each control-plane process, kqueue and the
runner, the API server's mean pod-creation latency and its round trips to kqueue's webhooks,
and kqueue's own time answering them. ``--kcm-*``, ``--job-syncs`` and ``--scheduler-*`` raise
kube-controller-manager's and kube-scheduler's client limits and the Job controller's
concurrency (LocalCluster parameters; defaults unchanged), so kqueue's part can be measured
without those bounds. Pods complete 5 s after they start. kqueue's
``kqueue_admitted_workloads_total`` is sampled every 0.5 s for the admission throughput curve.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config as kube_config  # noqa: E402

from bench.e2e_workloads import (  # noqa: E402
    BenchKqueue,
    kqueue_admitted_total,
    metric_samples,
    proc_cpu_seconds,
    proc_memory,
    run_info,
)
from bench.watch import watch_from_now  # noqa: E402
from kqueue.api.config import ClientConnection  # noqa: E402
from kqueue.api.v1alpha1 import constants as c  # noqa: E402
from kqueue.controller.kube import Kube  # noqa: E402
from kqueue.controller.resources import (  # noqa: E402
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kqueue.controller.webhooks.config import MUTATING_NAME  # noqa: E402
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL, FakeNode  # noqa: E402
from tests.controller_e2e.harness import install_crds, job  # noqa: E402

NS = "jobs"
NODES = tuple(
    FakeNode(
        name=f"kwok-bench-{i}",
        labels={INSTANCE_TYPE_LABEL: "on-demand"},
        allocatable={"cpu": "1000", "memory": "4Ti", "pods": "1000"},
    )
    for i in range(4)
)


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return round(s[k], 3)


# The steps of one Job's timeline, in order; each is the runner's clock when it saw the step
# (watch events), counted from the Job's create request.
STEPS = ("admitted", "resumed", "podsExist", "released", "bound")
STEP_HELP = {
    "admitted": "its Workload's Admitted condition is True",
    "resumed": "the Job's spec.suspend is false",
    "podsExist": "all its pods exist (created by the Job controller)",
    "released": "all its pods are out of the kqueue.io/admission gate",
    "bound": "all its pods are bound to a node (spec.nodeName)",
}


class Tracker:
    """Per Job, when each step of :data:`STEPS` was first seen; per pod, when it was first
    seen (created), released and bound."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.created: dict[str, float] = {}
        self.size: dict[str, int] = {}
        self.steps: dict[str, dict[str, float]] = {}
        self.pod_seen: dict[str, float] = {}
        self.pod_released: dict[str, float] = {}
        self.pod_bound: dict[str, float] = {}
        self.pods_of: dict[str, set[str]] = {}
        self.released_pods: dict[str, set[str]] = {}
        self.bound_pods: dict[str, set[str]] = {}
        self.changed = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def step(self, job_name: str, step: str, now: float) -> None:
        self.steps.setdefault(job_name, {}).setdefault(step, now)
        if step == "bound":
            self.changed.set()

    def observe_pod(self, pod: dict[str, Any]) -> None:
        job_name = (pod["metadata"].get("labels") or {}).get("job-name")
        if job_name is None or job_name not in self.size:
            return
        name = pod["metadata"]["name"]
        spec = pod.get("spec") or {}
        now = self.now()
        size = self.size[job_name]
        self.pod_seen.setdefault(name, now)
        pods = self.pods_of.setdefault(job_name, set())
        pods.add(name)
        if len(pods) >= size:
            self.step(job_name, "podsExist", now)
        if not spec.get("schedulingGates"):
            self.pod_released.setdefault(name, now)
            s = self.released_pods.setdefault(job_name, set())
            s.add(name)
            if len(s) >= size:
                self.step(job_name, "released", now)
        if spec.get("nodeName"):
            self.pod_bound.setdefault(name, now)
            s = self.bound_pods.setdefault(job_name, set())
            s.add(name)
            if len(s) >= size:
                self.step(job_name, "bound", now)

    def observe_job(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name in self.size and (obj.get("spec") or {}).get("suspend") is False:
            self.step(name, "resumed", self.now())

    def observe_workload(self, obj: dict[str, Any]) -> None:
        owners = obj["metadata"].get("ownerReferences") or []
        job_name = next((o["name"] for o in owners if o.get("kind") == "Job"), None)
        if job_name is None or job_name not in self.size:
            return
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(x.get("type") == c.ADMITTED and x.get("status") == "True" for x in conditions):
            self.step(job_name, "admitted", self.now())


def percentiles(values: list[float]) -> dict[str, float | None]:
    return {f"p{p}": percentile(values, p) for p in (50, 95, 99)}


def timeline(tr: Tracker, names: list[str]) -> dict[str, Any]:
    """Per step: seconds from the Job's creation, and from the step before (what the step
    itself took), as p50/p95/p99 over the Jobs that reached it."""
    since_created: dict[str, Any] = {}
    step_took: dict[str, Any] = {}
    previous = "created"
    for step in STEPS:
        total, took = [], []
        for n in names:
            steps = tr.steps.get(n, {})
            if step not in steps:
                continue
            total.append(steps[step] - tr.created[n])
            before = tr.created[n] if previous == "created" else steps.get(previous)
            if before is not None:
                took.append(steps[step] - before)
        since_created[step] = {"jobs": len(total), **percentiles(total)}
        step_took[f"{previous}->{step}"] = percentiles(took)
        previous = step
    pods = [p for n in names for p in tr.pods_of.get(n, ())]
    # kqueue's own part per pod: from the pod's creation (as the runner saw it) to its release;
    # then the scheduler's: from release to binding.
    release_lag = [tr.pod_released[p] - tr.pod_seen[p] for p in pods if p in tr.pod_released]
    bind_lag = [tr.pod_bound[p] - tr.pod_released[p] for p in pods
                if p in tr.pod_bound and p in tr.pod_released]
    return {
        "sinceCreated": since_created,
        "stepTook": step_took,
        "podCreatedToReleased": percentiles(release_lag),
        "podReleasedToBound": percentiles(bind_lag),
    }


def rate(times: list[float]) -> dict[str, float | None]:
    """Events per second: mean from the first to the last, and the busiest 1 s window."""
    if len(times) < 2:
        return {"count": len(times), "meanPerSecond": None, "peak1sPerSecond": None}
    s = sorted(times)
    peak, j = 0, 0
    for i, t in enumerate(s):
        while s[j] < t - 1.0:
            j += 1
        peak = max(peak, i - j + 1)
    span = s[-1] - s[0]
    return {"count": len(s), "meanPerSecond": round((len(s) - 1) / span, 1) if span else None,
            "peak1sPerSecond": float(peak), "firstToLastSeconds": round(span, 2)}


async def sampler(kq: BenchKqueue, tr: Tracker, series: list[dict[str, float]]) -> None:
    assert kq.proc is not None
    while True:
        admitted = await asyncio.to_thread(kqueue_admitted_total, kq)
        series.append({
            "t": round(tr.now(), 2), "admittedTotal": admitted,
            "cpuSeconds": round(proc_cpu_seconds(kq.proc.pid), 2),
            "rssBytes": proc_memory(kq.proc.pid)[0],
        })
        await asyncio.sleep(0.5)


def cpu_by_process(cluster: LocalCluster, kq: BenchKqueue) -> dict[str, float]:
    """CPU seconds used so far by each control-plane component, kqueue and this runner: on a
    small machine they share the cores, so who used them says what bounds the run."""
    pids = {name: comp.proc.pid for name, comp in cluster._components.items()
            if comp.proc is not None and comp.running()}
    if kq.proc is not None:
        pids["kqueue"] = kq.proc.pid
    out = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
    out["runner"] = time.process_time()
    return out


def apiserver_latencies(cluster: LocalCluster) -> dict[str, tuple[float, float]]:
    """(count, sum of seconds) so far: pod creations, bindings and patches as the API server
    served them, and the calls it made to kqueue's webhooks (a pod creation waits for kqueue's
    pod webhook), by webhook name."""
    status, text = cluster.request("GET", "/metrics", timeout=30)
    assert status == 200, status
    out: dict[str, list[float]] = {}

    def add(key: str, name: str, labels: dict[str, str], value: float) -> None:
        total = out.setdefault(key, [0.0, 0.0])
        total[0 if name.endswith("_count") else 1] += value

    for name in ("apiserver_request_duration_seconds_count",
                 "apiserver_request_duration_seconds_sum"):
        for labels, value in metric_samples(str(text), name):
            if labels.get("resource") != "pods":
                continue
            # Pod creations (the Job controller), bindings (kube-scheduler), and patches
            # (kqueue's releases, and the Job controller's removal of its tracking finalizer
            # from finished pods; kwok's status writes are PATCH pods/status, not counted).
            verb, sub = labels.get("verb"), labels.get("subresource", "")
            if (verb, sub) in (("POST", ""), ("POST", "binding"), ("PATCH", "")):
                add(f"{verb} pods{'/' + sub if sub else ''}", name, labels, value)
    for name in ("apiserver_admission_webhook_admission_duration_seconds_count",
                 "apiserver_admission_webhook_admission_duration_seconds_sum"):
        for labels, value in metric_samples(str(text), name):
            if labels.get("name", "").endswith("kqueue.io"):
                add(f"webhook {labels['name']} {labels.get('operation')}", name, labels, value)
    return {k: (v[0], v[1]) for k, v in out.items()}


def kqueue_webhook_latencies(kq: BenchKqueue) -> dict[str, tuple[float, float]]:
    """(count, sum of seconds) so far of kqueue's own time answering admission requests, by
    webhook path: the rest of the API server's figure for the same webhook is the trip."""
    text = kq.metrics()
    out: dict[str, list[float]] = {}
    for name in ("kqueue_webhook_request_duration_seconds_count",
                 "kqueue_webhook_request_duration_seconds_sum"):
        for labels, value in metric_samples(text, name):
            total = out.setdefault(f"kqueue {labels.get('webhook')}", [0.0, 0.0])
            total[0 if name.endswith("_count") else 1] += value
    return {k: (v[0], v[1]) for k, v in out.items()}


def latency_delta(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for key, (count, total) in after.items():
        c0, s0 = before.get(key, (0.0, 0.0))
        n = count - c0
        out[key] = {"count": n, "meanSeconds": round((total - s0) / n, 4) if n else None}
    return out


# An experiment, not kqueue's configuration: the API server skips kqueue's pod webhook for
# pods that already carry the admission gate (a Job's pods get it from the template kqueue's Job
# webhook prepared), which is all that webhook adds when gang scheduling is off (as here).
SKIP_GATED = {
    "name": "not-already-gated",
    "expression": "!(has(object.spec.schedulingGates) && object.spec.schedulingGates.exists("
    f"g, g.name == '{c.ADMISSION_GATE}'))",
}


def skip_gated_pod_webhook(cluster: LocalCluster) -> None:
    config = json.loads(cluster.kubectl(
        "get", "mutatingwebhookconfiguration", MUTATING_NAME, "-o", "json").stdout)
    hooks = [h for h in config["webhooks"] if h["name"] == "mpod.kqueue.io"]
    assert len(hooks) == 1, [h["name"] for h in config["webhooks"]]
    hooks[0]["matchConditions"] = [SKIP_GATED]
    cluster.kubectl("replace", "-f", "-", input=json.dumps(config))


async def setup_queues(kube: Kube) -> None:
    await kube.create(RESOURCE_FLAVORS, {
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    await kube.create(CLUSTER_QUEUES, {
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": NS},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "default", "resources": [
                {"name": "cpu", "nominalQuota": "100000"},
                {"name": "memory", "nominalQuota": "100Ti"}]}],
        }]},
    })
    await kube.create(LOCAL_QUEUES, {
        "apiVersion": c.API_VERSION, "kind": "LocalQueue",
        "metadata": {"name": NS, "namespace": NS}, "spec": {"clusterQueue": NS}},
        namespace=NS)
    await asyncio.sleep(3)  # the ClusterQueue becomes active


async def phase_latencies(cluster: LocalCluster, kq: BenchKqueue) -> dict[str, tuple[float, float]]:
    out = await asyncio.to_thread(apiserver_latencies, cluster)
    if kq.proc is not None:
        out.update(await asyncio.to_thread(kqueue_webhook_latencies, kq))
    return out


async def run(args: argparse.Namespace, cluster: LocalCluster) -> dict[str, Any]:
    assert cluster.work_dir is not None
    work = cluster.work_dir / "kqueue"
    work.mkdir(parents=True, exist_ok=True)
    install_crds(cluster)
    kq = BenchKqueue(cluster, work, qps=args.qps, burst=args.burst)
    # --without-kqueue: the control plane's own floor for the same Jobs (no kqueue process, no
    # webhook configurations, no queue label), to set kqueue's runs against.
    with_kqueue = not args.without_kqueue
    if with_kqueue:
        kq.setup()
        if args.skip_gated_pod_webhook:
            skip_gated_pod_webhook(cluster)
        await asyncio.to_thread(kq.start)
    api = await kube_config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    kube = Kube(api, timeout=120)
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": NS}})
    if with_kqueue:
        await setup_queues(kube)

    tr = Tracker()
    watchers = [
        asyncio.create_task(watch_from_now(kube, PODS.collection_path(NS), tr.observe_pod)),
        asyncio.create_task(watch_from_now(kube, JOBS.collection_path(NS), tr.observe_job)),
        asyncio.create_task(watch_from_now(kube, WORKLOADS.collection_path(NS), tr.observe_workload)),
    ]
    series: list[dict[str, float]] = []
    sampling = asyncio.create_task(sampler(kq, tr, series)) if with_kqueue else None
    cpu0 = proc_cpu_seconds(kq.proc.pid) if kq.proc is not None else 0.0
    info_before = run_info()
    phases: list[dict[str, Any]] = []
    for size in args.sizes:
        names = [f"job-{size}-{i:03d}" for i in range(args.jobs)]
        phase_start = tr.now()
        cpu_start = cpu_by_process(cluster, kq)
        latencies_start = await phase_latencies(cluster, kq)

        async def create(i: int, name: str, start: float, size: int = size) -> None:
            await asyncio.sleep(max(0.0, start + i / args.rate - tr.now()))
            tr.size[name] = size
            body = job(name, NS, NS, count=size, cpu="10m", complete_after="5s")
            if not with_kqueue:
                del body["metadata"]["labels"][c.QUEUE_NAME_LABEL]
            sent = tr.now()
            await kube.create(JOBS, body, namespace=NS)
            tr.created[name] = sent

        await asyncio.gather(*(create(i, n, phase_start) for i, n in enumerate(names)))
        deadline = time.monotonic() + args.timeout
        while not all("bound" in tr.steps.get(n, {}) for n in names) and (
            time.monotonic() < deadline
        ):
            tr.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tr.changed.wait(), 2)
        cpu_end = cpu_by_process(cluster, kq)
        latencies = latency_delta(latencies_start, await phase_latencies(cluster, kq))
        steps = {n: tr.steps.get(n, {}) for n in names}
        released = [steps[n]["released"] - tr.created[n] for n in names if "released" in steps[n]]
        bound = [steps[n]["bound"] - tr.created[n] for n in names if "bound" in steps[n]]
        pods = [p for n in names for p in tr.pods_of.get(n, ())]
        phase = {
            "podsPerJob": size,
            "jobs": len(names),
            "start": round(phase_start, 2),
            "end": round(tr.now(), 2),
            "allReleased": len(released),
            "allBound": len(bound),
            "releasedSeconds": {f"p{p}": percentile(released, p) for p in (50, 95, 99)},
            "boundSeconds": {f"p{p}": percentile(bound, p) for p in (50, 95, 99)},
            "releasedMeanSeconds": round(statistics.fmean(released), 3) if released else None,
            "timeline": timeline(tr, names),
            # The Job controller's pod creation (kube-controller-manager), kqueue's releases and
            # kube-scheduler's bindings, as the runner's pod watch saw them.
            "podsCreated": rate([tr.pod_seen[p] for p in pods]),
            "podsReleased": rate([tr.pod_released[p] for p in pods if p in tr.pod_released]),
            "podsBound": rate([tr.pod_bound[p] for p in pods if p in tr.pod_bound]),
            "cpuSeconds": {k: round(v - cpu_start.get(k, 0.0), 1) for k, v in cpu_end.items()},
            "apiServer": latencies,
            "perJob": {n: {"created": round(tr.created[n], 3),
                           **{k: round(v, 3) for k, v in steps[n].items()}} for n in names},
        }
        print(json.dumps({k: v for k, v in phase.items() if k != "perJob"}), flush=True)
        phases.append(phase)
        await asyncio.sleep(8)  # pods complete, quota is released, before the next size
    cpu = proc_cpu_seconds(kq.proc.pid) - cpu0 if kq.proc is not None else None
    peak = proc_memory(kq.proc.pid)[1] if kq.proc is not None else None
    for t in (*watchers, *([sampling] if sampling is not None else [])):
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
    await api.close()
    if with_kqueue:
        await asyncio.to_thread(kq.stop)
    return {
        "qps": args.qps, "burst": args.burst, "rate": args.rate,
        "controllerManagerQps": cluster.controller_manager_qps,
        "controllerManagerBurst": cluster.controller_manager_burst,
        "schedulerQps": cluster.scheduler_qps, "schedulerBurst": cluster.scheduler_burst,
        "concurrentJobSyncs": cluster.concurrent_job_syncs,
        "skipGatedPodWebhook": args.skip_gated_pod_webhook,
        "withoutKqueue": args.without_kqueue,
        "run": {"before": info_before, "after": run_info()}, "phases": phases,
        "controllerCpuSeconds": round(cpu, 1) if cpu is not None else None,
        "controllerPeakRssBytes": peak,
        "series": series,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result["series"]
    t = [x["t"] for x in s]
    total = [x["admittedTotal"] for x in s]
    rate = [0.0] + [
        (total[i] - total[i - 1]) / max(t[i] - t[i - 1], 1e-6) for i in range(1, len(s))
    ]
    # A 2 s moving window: the counter is sampled every 0.5 s.
    smooth = [statistics.fmean(rate[max(0, i - 3): i + 1]) for i in range(len(rate))]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.plot(t, smooth, label="admitted workloads/s (2 s window)")
    ax2 = ax.twinx()
    ax2.plot(t, total, color="C2", alpha=0.6, label="kqueue_admitted_workloads_total")
    for ph in result["phases"]:
        ax.axvspan(ph["start"], ph["end"], alpha=0.08, color="C1")
        ax.text(ph["start"], max(smooth or [1]) * 0.95, f" {ph['podsPerJob']} pods/Job", fontsize=8)
    ax.set(xlabel="seconds", ylabel="workloads/s",
           title=f"Jobs at {result['rate']}/s, client QPS {result['qps'] or 'unthrottled'}")
    ax2.set_ylabel("admitted (cumulative)")
    fig.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5,20,100")
    parser.add_argument("--jobs", type=int, default=30, help="Jobs per size")
    parser.add_argument("--rate", type=float, default=10, help="Jobs created per second")
    defaults = ClientConnection()
    parser.add_argument("--qps", type=int, default=defaults.qps,
                        help="kqueue's clientConnection.qps (default: kqueue's own default)")
    parser.add_argument("--burst", type=int, default=defaults.burst,
                        help="kqueue's clientConnection.burst (default: kqueue's own default)")
    parser.add_argument("--kcm-qps", type=float, default=None,
                        help="kube-controller-manager's --kube-api-qps (default: LocalCluster's)")
    parser.add_argument("--kcm-burst", type=int, default=None,
                        help="kube-controller-manager's --kube-api-burst")
    parser.add_argument("--job-syncs", type=int, default=None,
                        help="kube-controller-manager's --concurrent-job-syncs (default: its own, 5)")
    parser.add_argument("--scheduler-qps", type=float, default=None,
                        help="kube-scheduler's --kube-api-qps (default: its own, 50)")
    parser.add_argument("--scheduler-burst", type=int, default=None,
                        help="kube-scheduler's --kube-api-burst (default: its own, 100)")
    parser.add_argument("--skip-gated-pod-webhook", action="store_true",
                        help="experiment: the API server does not call kqueue's pod webhook for "
                        "pods already carrying the admission gate (a match condition)")
    parser.add_argument("--without-kqueue", action="store_true",
                        help="the control plane's floor: the same Jobs without a queue label, "
                        "kqueue not running and its webhooks not installed")
    parser.add_argument("--timeout", type=float, default=300, help="per size (s)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/e2e_jobs.json"))
    parser.add_argument("--plot", type=Path, default=Path("docs/img/e2e_jobs_admission.png"))
    args = parser.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",")]

    async def go() -> dict[str, Any]:
        limits: dict[str, Any] = {
            k: v for k, v in {
                "controller_manager_qps": args.kcm_qps,
                "controller_manager_burst": args.kcm_burst,
                "concurrent_job_syncs": args.job_syncs,
                "scheduler_qps": args.scheduler_qps,
                "scheduler_burst": args.scheduler_burst,
            }.items() if v is not None
        }
        with LocalCluster(nodes=NODES, **limits) as cluster:
            return await run(args, cluster)

    result = asyncio.run(go())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if result["series"]:
        plot(result, args.plot)
    print(json.dumps({k: v for k, v in result.items() if k not in ("series", "phases")}, indent=1))


if __name__ == "__main__":
    main()
