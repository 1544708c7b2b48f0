"""`make run-multikueue` (hack/run_local.py --multikueue-workers=2), started as a person starts
it: it prints the contexts; the sample Job created on the manager runs on a worker and finishes
there, the manager's Job and Workload show it; Ctrl-C stops everything cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kqueue.localcluster import build

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
READY = "Press Ctrl-C to stop every kqueue and cluster."
WORKERS = ("worker1", "worker2")


class Run:
    """The script as a subprocess, its output collected line by line."""

    def __init__(self, work: Path) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "hack/run_local.py", "--multikueue-workers=2", f"--work-dir={work}"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, within: float) -> None:
        deadline = time.monotonic() + within
        while READY not in self.lines:
            if self.proc.poll() is not None:
                self._reader.join(5)
                pytest.fail(f"run-multikueue exited ({self.proc.returncode}):\n{self.output}")
            if time.monotonic() > deadline:
                pytest.fail(f"run-multikueue not ready within {within:.0f}s:\n{self.output}")
            time.sleep(0.5)

    def interrupt(self, within: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            pytest.fail(f"run-multikueue did not stop within {within:.0f}s of Ctrl-C")


def kubectl(kubeconfig: Path, context: str, *args: str) -> str:
    bin_dir = build.binaries_ready()
    assert bin_dir is not None, "the control plane binaries are built before cluster tests run"
    out = subprocess.run(
        [str(bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", f"--context={context}", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, f"kubectl --context={context} {' '.join(args)}: {out.stderr}"
    return out.stdout


def is_true(obj: dict[str, Any], kind: str) -> bool:
    return any(cd["type"] == kind and cd["status"] == "True"
               for cd in (obj.get("status") or {}).get("conditions") or [])


def test_make_run_multikueue_runs_the_sample_job_on_a_worker(tmp_path: Path) -> None:
    run = Run(tmp_path)
    try:
        run.wait_ready(within=420)
        kubeconfig = tmp_path / "kubeconfig"
        assert f"export KUBECONFIG={kubeconfig}" in run.output
        contexts = kubectl(kubeconfig, "manager", "config", "get-contexts", "-o", "name").split()
        assert sorted(contexts) == ["manager", *WORKERS]
        for worker in WORKERS:
            # Each worker is its own API server, with the sample queue of its own.
            assert kubectl(kubeconfig, worker, "get", "localqueue", "-n", "default",
                           "user-queue", "-o", "name").strip() == "localqueue.kqueue.io/user-queue"

        def manager_get(*args: str) -> dict[str, Any]:
            return dict(json.loads(kubectl(kubeconfig, "manager", "get", "-o", "json", *args)))

        deadline = time.monotonic() + 120
        while not all(is_true(mkc, "Active") for mkc in manager_get("multikueueclusters")["items"]):
            assert time.monotonic() < deadline, manager_get("multikueueclusters")
            time.sleep(1)

        created = kubectl(kubeconfig, "manager", "create", "-o", "name", "-f",
                          str(ROOT / "config/samples/multikueue/job.yaml")).strip()
        job_name = created.split("/", 1)[1]

        def workload() -> dict[str, Any] | None:
            for wl in manager_get("workloads.kqueue.io", "-n", "default")["items"]:
                if any(o["name"] == job_name for o in wl["metadata"].get("ownerReferences") or []):
                    return wl
            return None

        deadline = time.monotonic() + 180
        while (wl := workload()) is None or not is_true(wl, "Finished"):
            assert time.monotonic() < deadline, f"not finished: {wl}"
            time.sleep(2)
        assert wl["status"].get("clusterName") in WORKERS, wl["status"]
        job = manager_get("job", "-n", "default", job_name)
        assert job["status"].get("succeeded") == 2, job["status"]
        # The manager ran no pod of it: the worker did.
        assert manager_get("pods", "-n", "default")["items"] == []
    finally:
        code = run.interrupt()
    assert code == 0, run.output
    assert "[make run] stopping" in run.output
