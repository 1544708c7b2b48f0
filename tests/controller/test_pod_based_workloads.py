"""Pods made by Argo Workflows and Tekton (Kueue's "pod-based workloads"), shaped as those
controllers make them (tests/controller/pod_based_pods.yaml): queued by the pod integration
although their Workflow or TaskRun controls them; a pod controlled by any other kind kqueue
does not integrate is still left to its owner."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kqueue.api.integrations.management import manages
from kqueue.api.v1alpha1 import constants as c
from kqueue.cli.main import cli
from kqueue.controller.integrations.pod.generic import is_plain
from kqueue.controller.integrations.pod.webhook import mutate_plain_pod
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
HERE = Path(__file__).resolve().parent
PODS = HERE / "pod_based_pods.yaml"
ARGO, TEKTON = (d for d in yaml.safe_load_all(PODS.read_text()) if d)


def _owned_by(pod: Obj, api_version: str, kind: str) -> Obj:
    out = copy.deepcopy(pod)
    out["metadata"]["ownerReferences"][0].update({"apiVersion": api_version, "kind": kind})
    return out


@pytest.mark.parametrize("pod", [ARGO, TEKTON], ids=["argo workflow step", "tekton taskrun"])
async def test_a_pod_based_workload_s_pod_is_held_and_queued_on_its_own(pod: Obj) -> None:
    assert is_plain(pod)
    assert manages(pod)
    req = AdmissionRequest(
        uid="u", operation="CREATE", kind={"kind": "Pod"}, resource={"resource": "pods"},
        namespace="default", name=pod["metadata"]["name"], object=copy.deepcopy(pod), old_object=None,
    )
    out = (await mutate_plain_pod(req)).patched
    assert out is not None
    assert {"name": c.ADMISSION_GATE} in out["spec"]["schedulingGates"]
    assert c.MANAGED_FINALIZER in out["metadata"]["finalizers"]


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("example.com/v1", "Workflow"), ("argoproj.io/v1alpha1", "CronWorkflow"), ("tekton.dev/v1", "PipelineRun")],
)
def test_a_pod_controlled_by_another_kind_is_left_to_its_owner(api_version: str, kind: str) -> None:
    pod = _owned_by(ARGO, api_version, kind)
    assert not is_plain(pod)
    decision = manages(pod)
    assert not decision and f"controlled by {kind}" in decision.reason


def test_simulate_admits_them() -> None:
    quickstart = HERE.parents[1] / "config" / "samples" / "quickstart.yaml"
    res = CliRunner().invoke(cli, ["simulate", "-o", "json", str(quickstart), str(PODS)])
    assert res.exit_code == 0, res.output
    workloads = json.loads(res.stdout)["workloads"]
    assert {w["state"] for w in workloads.values()} == {"Admitted"}
    # The Argo pod is its own Workload; the Tekton pod is its pod group's.
    argo = [k for k in workloads if k.startswith(f"default/pod-{ARGO['metadata']['name']}-")]
    assert len(argo) == 1 and set(workloads) == {*argo, "default/build-run-abc"}
