"""Reading pods and workload slices in the end-to-end tests of elastic jobs, plain pods,
waitForPodsReady and high availability."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    eventually,
    kqueue_running,
    pause_container,
)

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


@dataclass
class ConfiguredKqueue(KqueueProcess):
    """``kqueue run`` with settings merged over the harness's configuration."""

    overrides: Obj = field(default_factory=dict)

    def config_yaml(self) -> str:
        config = yaml.safe_load(super().config_yaml())
        _merge(config, self.overrides)
        return str(yaml.safe_dump(config))


def _merge(base: Obj, extra: Obj) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def configured_kqueue(
    cluster: LocalCluster, work_dir: Path, overrides: Obj
) -> Iterator[ConfiguredKqueue]:
    """Set up, start and finally tear down a configured ``kqueue run`` (for module fixtures)."""
    proc = ConfiguredKqueue(cluster=cluster, work_dir=work_dir, overrides=overrides)
    yield from kqueue_running(proc)


@dataclass
class PodsKqueue(ConfiguredKqueue):
    """A configured ``kqueue run`` with the pod integration; the harness's generated webhook
    configuration routes plain pods (queue label) to it."""

    def teardown(self) -> None:
        # Pods left by a failed test keep kqueue's finalizer: drop it so namespaces can go.
        res = self.cluster.kubectl(
            "get", "pods", "-A", "-l", c.MANAGED_LABEL, "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
            check=False,
        )
        for line in res.stdout.split():
            namespace, name = line.split("/", 1)
            self.cluster.kubectl(
                "patch", "pod", name, "-n", namespace, "--type=merge",
                "-p", '{"metadata":{"finalizers":null}}', check=False,
            )
        super().teardown()


def pods_kqueue(cluster: LocalCluster, work_dir: Path, overrides: Obj) -> Iterator[PodsKqueue]:
    yield from kqueue_running(PodsKqueue(cluster=cluster, work_dir=work_dir, overrides=overrides))


def pod(
    name: str,
    namespace: str,
    queue: str,
    *,
    cpu: str = "1",
    group: str | None = None,
    total: int | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """A plain pod naming ``queue`` (a pause container requesting ``cpu``); with ``group``,
    a member of that pod group of ``total`` pods."""
    labels = {c.QUEUE_NAME_LABEL: queue}
    notes = dict(annotations or {})
    if group is not None:
        labels[c.POD_GROUP_NAME_LABEL] = group
        notes[c.POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(total)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": notes},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                pause_container(cpu)
            ],
        },
    }


async def quota_freed(api: Api, cq: str) -> None:
    """Wait until ClusterQueue ``cq`` admits nothing and every resource's usage is back to 0."""

    async def freed() -> bool:
        st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
        used = [r.get("total") for f in st.get("flavorsUsage") or [] for r in f["resources"]]
        return st.get("admittedWorkloads", 0) == 0 and all(u in (0, "0") for u in used)

    await eventually(freed, within=60, what=f"ClusterQueue {cq}'s quota freed")
