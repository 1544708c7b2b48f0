"""Manifests for the visibility tests: one flavor, ClusterQueues, LocalQueues, Workloads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kqueue.api.loader import load_text
from kqueue.api.v1alpha1 import format_time
from kqueue.engine.engine import Engine
from kqueue.sim.scenario import build_scenario
from kqueue.visibility.state import settled_engine

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Obj = dict[str, Any]


def flavor(name: str = "default") -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
    }


def cluster_queue(
    name: str, cpu: str, *, strategy: str = "BestEffortFIFO", stop_policy: str = "None"
) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": strategy,
            "stopPolicy": stop_policy,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                    ],
                }
            ],
        },
    }


def local_queue(name: str, cq: str, namespace: str = "team") -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def workload(
    name: str,
    queue: str,
    *,
    cpu: str = "1",
    priority: int = 0,
    created: int = 0,
    namespace: str = "team",
    annotations: dict[str, str] | None = None,
) -> Obj:
    """``created``: seconds after T0 (queue order among equal priorities)."""
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": format_time(T0 + timedelta(seconds=created)),
            "annotations": annotations or {},
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
        },
    }


def _condition(kind: str, at: int, reason: str = "") -> Obj:
    return {
        "type": kind,
        "status": "True",
        "reason": reason or kind,
        "message": "",
        "lastTransitionTime": format_time(T0 + timedelta(seconds=at)),
    }


def _admission() -> Obj:
    return {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"},
             "count": 1}
        ],
    }


def finished(name: str, admitted: int, done: int, queue: str = "a") -> Obj:
    """A Workload of ``queue`` that ran from ``admitted`` to ``done`` (seconds after T0)."""
    wl = workload(name, queue)
    wl["status"] = {
        "admission": _admission(),
        "conditions": [
            _condition("QuotaReserved", admitted),
            _condition("Admitted", admitted),
            _condition("Finished", done, "Succeeded"),
        ],
    }
    return wl


def running(name: str, admitted: int, queue: str = "a") -> Obj:
    wl = workload(name, queue)
    wl["status"] = {
        "admission": _admission(),
        "conditions": [_condition("QuotaReserved", admitted), _condition("Admitted", admitted)],
    }
    return wl


def engine_of(docs: list[Obj]) -> Engine:
    import yaml

    loaded = load_text(yaml.safe_dump_all(docs), "<test>")
    return settled_engine(build_scenario(loaded.objects))
