"""Reading pods and workload slices in the end-to-end tests of elastic jobs, plain pods,
waitForPodsReady and high availability."""

from __future__ import annotations

from typing import Any

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import PODS, WORKLOADS
from tests.controller_e2e.harness import Api

Obj = dict[str, Any]


def gated(pod: Obj) -> bool:
    return {"name": c.ADMISSION_GATE} in ((pod.get("spec") or {}).get("schedulingGates") or [])


async def slices_of(api: Api, namespace: str, job_name: str) -> list[Obj]:
    """Every Workload the Job owns (an elastic Job has one per slice)."""
    out = []
    for wl in await api.kube.list(WORKLOADS, namespace=namespace):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job" and ref.get("name") == job_name:
                out.append(wl)
    return out


async def running_pods(api: Api, namespace: str, job_name: str, n: int) -> list[Obj] | None:
    """The Job's live pods when exactly ``n`` exist and all run (None otherwise)."""
    pods = [
        p for p in await api.pods_of(namespace, job_name)
        if not p["metadata"].get("deletionTimestamp")
    ]
    if len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods):
        return pods
    return None


async def pods(api: Api, namespace: str, label_selector: str = "") -> list[Obj]:
    return await api.kube.list(PODS, namespace=namespace, label_selector=label_selector)
