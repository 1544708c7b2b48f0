"""How many pods a wrapped object makes from each template (kqueue/api/integrations/
appwrapper.py, ``pods_made``), and the refusal of declared podSets that count otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.integrations.appwrapper import component_errors, managed_kinds, pods_made

Obj = dict[str, Any]
LWT = "template.spec.leaderWorkerTemplate"


def lws(replicas: int | None, size: int | None, *, leader: bool = True) -> Obj:
    lwt: Obj = {"workerTemplate": {"spec": {"containers": []}}}
    if size is not None:
        lwt["size"] = size
    if leader:
        lwt["leaderTemplate"] = {"spec": {"containers": []}}
    spec: Obj = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": spec}


CASES: dict[str, tuple[Obj, dict[str, int] | None]] = {
    "lws with a leader template": (
        lws(2, 3),
        {f"{LWT}.leaderTemplate": 2, f"{LWT}.workerTemplate": 4},
    ),
    "lws without a leader template: the workers' template makes the leaders": (
        lws(2, 3, leader=False),
        {f"{LWT}.workerTemplate": 6},
    ),
    "lws defaults: one group of one": (
        lws(None, None),
        {f"{LWT}.leaderTemplate": 1, f"{LWT}.workerTemplate": 0},
    ),
    "deployment": (
        {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3, "template": {}}},
        {"template.spec.template": 3},
    ),
    "job at most its completions": (
        {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 4, "completions": 2}},
        {"template.spec.template": 2},
    ),
    "an autoscaled ray cluster is not counted": (
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {"headGroupSpec": {}}},
        None,
    ),
}


@pytest.mark.parametrize(("template", "want"), CASES.values(), ids=CASES.keys())
def test_pods_made(template: Obj, want: dict[str, int] | None) -> None:
    assert pods_made(template) == want


def _appwrapper(template: Obj, pod_sets: list[Obj]) -> Obj:
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": "aw", "namespace": "ns"},
        "spec": {"components": [{"template": template, "podSets": pod_sets}]},
    }


def test_a_deployment_declared_with_fewer_replicas_than_it_runs_is_refused() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"replicas": 3, "template": {"spec": {"containers": []}}},
    }
    aw = _appwrapper(deployment, [{"path": "template.spec.template", "replicas": 2}])
    assert component_errors(aw, managed_kinds()) == [
        (
            "spec.components[0].podSets[0].replicas",
            "2, but the Deployment makes 3 pods from template.spec.template: its gang would "
            "never be placed whole; allowed: 3",
        )
    ]


def test_declared_counts_that_match_are_accepted() -> None:
    aw = _appwrapper(
        lws(2, 3),
        [
            {"path": f"{LWT}.leaderTemplate", "replicas": 2},
            {"path": f"{LWT}.workerTemplate", "replicas": 4},
        ],
    )
    assert component_errors(aw, managed_kinds()) == []
