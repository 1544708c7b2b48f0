"""Kueue and kqueue side by side on Kueue's scheduler benchmark, same API server build.

    python bench/side_by_side.py --kueue-src /tmp/kueue-src --scale 0.2 --runs 2 \\
        --out bench/results/side_by_side_x0.2.json
    python bench/side_by_side.py --kueue-src /tmp/kueue-src --config large-scale --scale 0.1 \\
        --runs 1 --out bench/results/side_by_side_large_scale_x0.1.json

``--kueue-src`` is a Kueue source checkout (for instance ``git clone`` of a Kueue mirror into
/tmp; nothing of it is copied here). Its scheduler performance runner
(``test/performance/scheduler/runner``) and ``minimalkueue`` are built with ``go build`` against
that checkout; the runner's envtest gets kqueue's own kube-apiserver and etcd (the binaries
``kqueue.localcluster`` uses, from ~/.cache/kqueue) through ``KUBEBUILDER_ASSETS``. Then, runs
alternating, each on a fresh API server:

* **Kueue**: the runner with ``--minimalKueue`` on Kueue's ``--config`` generator config
  (``baseline``: 30 ClusterQueues, 15,000 workloads; ``large-scale``: 1,000 ClusterQueues in 10
  cohorts, 50,000 workloads), every class's count times ``--scale`` (rounded half up, at least
  1); minimalkueue runs with its built-in client settings (QPS 50 / burst 100 per resource type).
* **kqueue**: ``bench/e2e_workloads.py --apiserver-only --shape <config>`` (etcd and
  kube-apiserver only, as envtest) with kqueue at ``--kqueue-qps``/``--kqueue-burst`` (default:
  kqueue's defaults). Before any run the scaled Kueue config is read back into kqueue's shape
  (``generate.from_kueue_generator``) and compared with kqueue's own: the two runners build the
  same objects or nothing runs. ``--kqueue-webhooks off`` runs kqueue without its webhook
  configurations, as minimalkueue (which serves none): the like-for-like comparison of the two
  controllers; ``on`` (the default) is kqueue as deployed.

Both are reported with Kueue's definitions (its runner's ``recorder.go``): usage = ClusterQueue
``status.flavorsUsage`` integrated over time, summed over the class, over nominal quota x (last
- first status event); time to admission = ``creationTimestamp`` to the Admitted condition's
``lastTransitionTime``; wall = that monitoring time. Plus the API server's own count of resource
requests (``apiserver_request_total`` from its /metrics) over the run, per admission (workloads
plus re-admissions after eviction; the two runners make the same requests, one create and one
finish per workload) and per second, the controller's CPU seconds and peak RSS, and
kqueue/Kueue ratios of the medians. The machine's load average is recorded around every run.

Not a test: the figures depend on the machine; nothing here runs in ``make test``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kqueue.sim import generate as gen  # noqa: E402

CACHE = Path.home() / ".cache" / "kqueue"
_SAMPLE = re.compile(r'^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def find_binary(name: str) -> Path:
    hits = sorted((CACHE / "bin").glob(f"*/{name}"))
    if not hits:
        raise SystemExit(f"{name} not found under {CACHE / 'bin'}: start a kqueue local cluster once")
    return hits[-1]


def source_commit(src: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=src, capture_output=True, text=True,
        check=False,
    ).stdout.strip()


def go_build(src: Path, out: Path, pkg: str) -> Path:
    """``go build`` Kueue's ``test/performance/scheduler/<pkg>`` from ``src`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / pkg
    print(f"go build {pkg} ({src} {source_commit(src)})", file=sys.stderr)
    subprocess.run(
        ["go", "build", "-o", str(target), f"./test/performance/scheduler/{pkg}"],
        cwd=src, check=True,
    )
    return target


def build_kueue(src: Path, out: Path) -> tuple[Path, Path, str]:
    """go build the runner and minimalkueue from ``src``; (runner, minimalkueue, commit)."""
    return go_build(src, out, "runner"), go_build(src, out, "minimalkueue"), source_commit(src)


def envtest_assets(out: Path) -> Path:
    """A KUBEBUILDER_ASSETS directory with kqueue's kube-apiserver, etcd and kubectl."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("kube-apiserver", "etcd", "kubectl"):
        link = out / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(find_binary(name))
    return out


CONFIGS = ("baseline", "large-scale", "tas")


def generator_config(src: Path, config: str, scale: float, out: Path) -> Path:
    """Kueue's ``configs/<config>/generator.yaml`` with every workload set's count scaled as
    kqueue's runner scales its shape; refuses to go on if the two runners would not build the
    same shape (a Kueue checkout whose config changed)."""
    doc = yaml.safe_load((src / f"test/performance/scheduler/configs/{config}/generator.yaml").read_text())
    for cohort in doc["cohorts"]:
        for qs in cohort["queuesSets"]:
            for ws in qs["workloadsSets"]:
                ws["count"] = gen.scaled_count(ws["count"], str(scale))
    kueue_shape = gen.from_kueue_generator(config, doc)
    ours = gen.scaled(gen.SHAPES[config], str(scale))
    if kueue_shape != ours:
        raise SystemExit(
            f"Kueue's {config} generator config ({src}) is not kqueue's {config} shape:\n"
            f"  Kueue:  {kueue_shape}\n  kqueue: {ours}\n"
            "update kqueue/sim/generate.py or use a matching Kueue checkout"
        )
    out.write_text(yaml.safe_dump(doc))
    return out


# -- the API server's request counter ----------------------------------------------------------


def _ssl_from_kubeconfig(path: Path, tmp: Path) -> tuple[str, ssl.SSLContext, dict[str, str]]:
    cfg = yaml.safe_load(path.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    ctx = ssl.create_default_context()
    if "certificate-authority-data" in cluster:
        ca = tmp / "ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        ctx.load_verify_locations(str(ca))
    elif cluster.get("insecure-skip-tls-verify"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    headers = {}
    if "client-certificate-data" in user:
        crt, key = tmp / "client.crt", tmp / "client.key"
        crt.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        ctx.load_cert_chain(str(crt), str(key))
    if "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    return cluster["server"].rstrip("/"), ctx, headers


def request_total(server: str, ctx: ssl.SSLContext, headers: dict[str, str]) -> float:
    """apiserver_request_total summed over resource requests (as bench/e2e_workloads.py)."""
    req = urllib.request.Request(f"{server}/metrics", headers=headers)
    with urllib.request.urlopen(req, context=ctx, timeout=20) as resp:
        text = resp.read().decode()
    total = 0.0
    for labels, value in _SAMPLE.findall(text):
        if dict(_LABEL.findall(labels)).get("resource"):
            total += float(value)
    return total


class Scraper(threading.Thread):
    """Reads the API server's request counter every second once its kubeconfig exists; keeps
    the first and the last reading (the runner stops the server when it is done)."""

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(daemon=True)
        self.kubeconfig = kubeconfig
        self.first: tuple[float, float] | None = None
        self.last: tuple[float, float] | None = None
        self.stop = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            target = None
            seen = 0.0
            while not self.stop.is_set():
                try:
                    if self.kubeconfig.exists() and self.kubeconfig.stat().st_mtime != seen:
                        seen = self.kubeconfig.stat().st_mtime
                        target = _ssl_from_kubeconfig(self.kubeconfig, Path(tmp))
                    if target is not None:
                        reading = (time.monotonic(), request_total(*target))
                        if self.first is None:
                            self.first = reading
                        self.last = reading
                except (OSError, ValueError, KeyError, ssl.SSLError) as exc:
                    if self.first is None:
                        self.error = repr(exc)  # before any reading: worth reporting
                self.stop.wait(1.0)


# -- one run of each -----------------------------------------------------------------------------


def run_kueue(
    runner: Path, minimal: Path, src: Path, assets: Path, gen: Path, out: Path, timeout: int,
    tas: bool = False,
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "kubeconfig").unlink(missing_ok=True)  # a stale one would name a dead server
    scraper = Scraper(out / "kubeconfig")
    scraper.start()
    load_before = os.getloadavg()
    started = time.monotonic()
    env = {**os.environ, "KUBEBUILDER_ASSETS": str(assets)}
    with (out / "runner.log").open("w") as log:
        proc = subprocess.run(
            [
                str(runner), f"--o={out}", f"--crds={src / 'config/components/crd/bases'}",
                f"--generatorConfig={gen}", f"--minimalKueue={minimal}",
                f"--timeout={timeout}s", "--withLogs=true", "--logToFile=true",
                # As Kueue's run-tas-performance-scheduler target: without it minimalkueue
                # admits none of the topology-aware workloads.
                *(["--enableTAS=true"] if tas else []),
            ],
            # The runner finds Kueue's project directory from its working directory.
            env=env, cwd=src, stdout=log, stderr=subprocess.STDOUT, check=False,
        )
    scraper.stop.set()
    scraper.join()
    if scraper.error and scraper.first is None:
        print(f"apiserver metrics: {scraper.error}", file=sys.stderr)
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    stats = yaml.safe_load((out / "minimalkueue.stats.yaml").read_text())
    cq = next(iter(summary["clusterQueueClasses"].values()))
    classes = summary["workloadClasses"]
    workloads = sum(c["count"] for c in classes.values())
    evictions = sum(c.get("totalEvictions", 0) for c in classes.values())
    wall = _seconds(cq["lastEventTime"]) - _seconds(cq["firstEventTime"])
    requests = request_seconds = None
    if scraper.first is not None and scraper.last is not None:
        requests = scraper.last[1] - scraper.first[1]
        request_seconds = round(scraper.last[0] - scraper.first[0], 1)
    return {
        "system": "kueue",
        "exitCode": proc.returncode,
        "loadAverage": {"before": _load(load_before), "after": _load(os.getloadavg())},
        "elapsedSeconds": round(time.monotonic() - started, 1),
        "wallSeconds": round(wall, 1),
        "usagePercent": round(100 * cq["cpuAverageUsage"] / cq["nominalQuota"], 2),
        "timeToAdmissionSeconds": {
            k: round(v["averageTimeToAdmissionMs"] / 1000, 2) for k, v in sorted(classes.items())
        },
        "workloads": workloads,
        "evictions": evictions,
        "apiserverRequests": requests,
        "requestSeconds": request_seconds if requests else None,
        "cpuSeconds": round((stats["userMs"] + stats["sysMs"]) / 1000, 1),
        "peakRssMiB": round(stats["maxrss"] / 1024),  # Linux maxrss is in KiB
        "client": "minimalkueue built-in: QPS 50 / burst 100 per resource type",
    }


def run_kqueue(
    config: str, scale: float, qps: int, burst: int, out: Path, timeout: int, webhooks: bool
) -> dict[str, Any]:
    out.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.monotonic()
    with out.with_suffix(".log").open("w") as log:
        proc = subprocess.run(
            [
                # Nobody scrapes minimalkueue's metrics during Kueue's runs either.
                sys.executable, str(ROOT / "bench/e2e_workloads.py"), "--apiserver-only",
                "--no-metrics-scrape", f"--shape={config}",
                f"--scale={scale}", f"--qps={qps}", f"--burst={burst}",
                f"--timeout={timeout}", f"--out={out}",
                *([] if webhooks else ["--no-webhooks"]),
            ],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False,
        )
    r = json.loads(out.read_text())
    k = r["kueueDefinitions"]
    api = r["apiserverRequests"]
    evictions = sum(c["evictions"] for c in k["classes"].values())
    return {
        "system": "kqueue",
        "exitCode": proc.returncode,
        "loadAverage": {"before": _load(load_before), "after": _load(os.getloadavg())},
        "elapsedSeconds": round(time.monotonic() - started, 1),
        "wallSeconds": k["clusterQueueUsage"]["monitoringSeconds"],
        "usagePercent": k["clusterQueueUsage"]["usagePercent"],
        "timeToAdmissionSeconds": {
            name: c["averageTimeToAdmissionSeconds"] for name, c in sorted(k["classes"].items())
        },
        "workloads": r["workloads"],
        "evictions": evictions,
        # Same window as its own figures: the run, not the setup.
        "apiserverRequests": api["total"],
        "requestSeconds": r["wallSeconds"],
        "cpuSeconds": r["controller"]["cpuSeconds"],
        "peakRssMiB": round(r["controller"]["peakRssBytes"] / 2**20),
        "client": f"QPS {qps} / burst {burst} per resource type",
        "webhooks": webhooks,
        "commit": r["run"]["before"]["commit"],
    }


def _seconds(value: Any) -> float:
    if isinstance(value, str):
        from datetime import datetime

        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value.timestamp())


def _load(avg: tuple[float, float, float]) -> list[float]:
    return [round(x, 2) for x in avg]


def derived(run: dict[str, Any]) -> dict[str, Any]:
    admissions = run["workloads"] + run["evictions"]
    req = run["apiserverRequests"]
    return {
        **run,
        "requestsPerAdmission": round(req / admissions, 2) if req else None,
        "requestsPerSecond": round(req / run["requestSeconds"], 1) if req else None,
    }


def ratios(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(system: str, key: str, sub: str | None = None) -> float | None:
        vals = [
            (r[key][sub] if sub else r[key]) for r in runs if r["system"] == system
        ]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    out: dict[str, Any] = {}
    keys: list[tuple[str, str | None]] = [
        ("wallSeconds", None), ("usagePercent", None), ("cpuSeconds", None), ("peakRssMiB", None),
        ("requestsPerAdmission", None), ("requestsPerSecond", None),
    ]
    classes = sorted({c for r in runs for c in r["timeToAdmissionSeconds"]})
    keys += [("timeToAdmissionSeconds", c) for c in classes]
    for key, sub in keys:
        a, b = med("kqueue", key, sub), med("kueue", key, sub)
        name = f"{key}.{sub}" if sub else key
        out[name] = {
            "kqueue": a, "kueue": b, "ratio": round(a / b, 2) if a is not None and b else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kueue-src", type=Path, required=True, help="a Kueue source checkout")
    parser.add_argument("--config", choices=CONFIGS, default="baseline",
                        help="Kueue's generator config; kqueue's runner builds the same shape")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--runs", type=int, default=2, help="runs of each, alternating")
    parser.add_argument("--kqueue-qps", type=int, default=300, help="kqueue's default: 300")
    parser.add_argument("--kqueue-burst", type=int, default=500, help="kqueue's default: 500")
    parser.add_argument(
        "--kqueue-webhooks", choices=("on", "off"), default="on",
        help="off: kqueue without its webhooks, as minimalkueue (which serves none)",
    )
    parser.add_argument(
        "--systems", default="kueue,kqueue",
        help="which to run, in this order, each run (e.g. kqueue: a kqueue-only variant to set "
        "beside an earlier pair)",
    )
    parser.add_argument("--timeout", type=int, default=1200)
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "side-by-side")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not systems or any(s not in ("kueue", "kqueue") for s in systems):
        parser.error(f"--systems: {args.systems!r}: allowed are kueue and kqueue, comma-separated")

    src = args.kueue_src.resolve()
    work = args.work_dir.resolve()
    runner, minimal, kueue_commit = build_kueue(src, work / "bin")
    assets = envtest_assets(work / "assets")
    config = generator_config(
        src, args.config, args.scale, work / f"generator-{args.config}-x{args.scale}.yaml"
    )
    runs: list[dict[str, Any]] = []
    for i in range(args.runs):
        for system in systems:
            print(f"run {i + 1}/{args.runs}: {system}", file=sys.stderr)
            if system == "kueue":
                r = run_kueue(
                    runner, minimal, src, assets, config, work / f"kueue-{i}", args.timeout,
                    tas=args.config == "tas",
                )
            else:
                r = run_kqueue(
                    args.config, args.scale, args.kqueue_qps, args.kqueue_burst,
                    work / f"kqueue-{i}.json", args.timeout, args.kqueue_webhooks == "on",
                )
            runs.append(derived(r))
            print(json.dumps(runs[-1]), file=sys.stderr)
    result = {
        "config": args.config,
        "scale": args.scale,
        "kueueCommit": kueue_commit,
        "apiserver": str(find_binary("kube-apiserver")),
        "etcd": str(find_binary("etcd")),
        "runs": runs,
        "medians": ratios(runs),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["medians"], indent=1))


if __name__ == "__main__":
    main()
