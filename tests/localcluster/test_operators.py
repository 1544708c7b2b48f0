"""Operator manifests are turned into loopback webhooks and CRDs without a cluster."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path
from typing import Any

import pytest

from kqueue.localcluster import build, operators

MANIFESTS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mthing.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-thing}
  rules: []
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  rules: []
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: vthing.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-thing}
  rules: []
"""

# As the modules' kustomize patches do: scope the pod webhook to the operator's own pods.
MUTATING_PATCH = """\
- op: add
  path: /webhooks/1/objectSelector
  value:
    matchExpressions: [{key: example.io/owner, operator: Exists}]
"""


@pytest.fixture
def module_root(tmp_path: Path) -> Path:
    (tmp_path / "webhook").mkdir()
    (tmp_path / "webhook" / "manifests.yaml").write_text(MANIFESTS)
    (tmp_path / "webhook" / "mutating-patch.yaml").write_text(MUTATING_PATCH)
    return tmp_path


def fake_operator() -> operators.Operator:
    return operators.Operator(
        name="thing",
        component=operators.get("jobset").component,
        crds=(),
        webhooks=operators.WebhookManifest(
            "webhook/manifests.yaml",
            {"MutatingWebhookConfiguration": "webhook/mutating-patch.yaml"},
        ),
        command=lambda ctx: ([], {}),
    )


def test_webhooks_point_at_loopback_with_the_local_ca(module_root: Path) -> None:
    docs = operators.webhook_documents(
        fake_operator(), module_root, base_url="https://127.0.0.1:4443", ca_bundle_b64="Q0E="
    )
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("MutatingWebhookConfiguration", "thing-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "thing-validating-webhook-configuration"),
    ]
    urls = [h["clientConfig"] for d in docs for h in d["webhooks"]]
    assert urls == [
        {"url": "https://127.0.0.1:4443/mutate-thing", "caBundle": "Q0E="},
        {"url": "https://127.0.0.1:4443/mutate--v1-pod", "caBundle": "Q0E="},
        {"url": "https://127.0.0.1:4443/validate-thing", "caBundle": "Q0E="},
    ]
    # the module's patch was applied to the mutating configuration only
    assert docs[0]["webhooks"][1]["objectSelector"] == {
        "matchExpressions": [{"key": "example.io/owner", "operator": "Exists"}]
    }
    assert "objectSelector" not in docs[1]["webhooks"][0]


@pytest.mark.parametrize(
    ("name", "ops", "want"),
    [
        (
            "replace in list",
            [{"op": "replace", "path": "/a/0", "value": 9}],
            {"a": [9, 2], "m": {}},
        ),
        ("add to list end", [{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3], "m": {}}),
        ("add key", [{"op": "add", "path": "/m/x~1y", "value": 1}], {"a": [1, 2], "m": {"x/y": 1}}),
        ("remove from list", [{"op": "remove", "path": "/a/1"}], {"a": [1], "m": {}}),
    ],
)
def test_json_patch(name: str, ops: list[dict[str, Any]], want: dict[str, Any]) -> None:
    doc = {"a": [1, 2], "m": {}}
    assert operators.apply_json_patch(doc, ops) == want
    assert doc == {"a": [1, 2], "m": {}}, "the input is not modified"


def test_json_patch_unsupported_op_is_named() -> None:
    with pytest.raises(operators.OperatorError, match="unsupported JSON patch op 'move' at /a"):
        operators.apply_json_patch({"a": 1}, [{"op": "move", "path": "/a", "from": "/b"}])


def test_unknown_operator_names_the_known_ones() -> None:
    with pytest.raises(operators.OperatorError) as err:
        operators.parse_names("jobset, nope")
    assert "unknown operator 'nope'" in str(err.value)
    assert "jobset" in str(err.value) and "trainer" in str(err.value)
    assert operators.parse_names("jobset,trainer") == ["jobset", "trainer"]
    assert operators.parse_names("") == []


def test_crd_list_paths_cover_every_served_version() -> None:
    crd = {
        "spec": {
            "group": "example.io",
            "names": {"plural": "things"},
            "versions": [
                {"name": "v1", "served": True},
                {"name": "v1beta1", "served": False},
                {"name": "v2"},
            ],
        }
    }
    assert operators.crd_list_paths([crd]) == [
        "/apis/example.io/v1/things",
        "/apis/example.io/v2/things",
    ]


def test_trainer_starts_after_jobset() -> None:
    assert operators.get("trainer").requires == ("jobset",)


def test_a_taken_fixed_port_is_named_before_start() -> None:
    """mpi-operator always binds :8080; a taken port is reported, not a crash loop."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        op = dataclasses.replace(operators.get("mpi-operator"), fixed_ports=(port,))
        with pytest.raises(operators.OperatorError) as err:
            operators.check_fixed_ports(op)
    assert f"always listens on :{port}" in str(err.value)
    assert "github.com/kubeflow/mpi-operator@" in str(err.value)


def test_jobset_is_built_with_trainers_build_list(tmp_path: Path) -> None:
    """The wrapper requires Trainer too, so the two builds share their compiled packages."""
    jobset = operators.get("jobset").component
    assert jobset.requires == ("github.com/kubeflow/trainer/v2 v2.3.0",)
    build._write_wrapper(jobset, "module sigs.k8s.io/jobset\n\ngo 1.26.0\n", tmp_path)
    gomod = (tmp_path / "go.mod").read_text()
    assert "require sigs.k8s.io/jobset v0.12.0\n" in gomod
    assert "require github.com/kubeflow/trainer/v2 v2.3.0\n" in gomod
    assert jobset.recipe()["requires"] == ["github.com/kubeflow/trainer/v2 v2.3.0"]
    # components without extra requirements keep the recipe (and so the stamps) they had
    assert all("requires" not in c.recipe() for c in build.components())


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param([], ["batch/job", "pod"], id="no operator: the built-in defaults"),
        pytest.param(
            ["trainer"],
            ["batch/job", "pod", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"],
            id="trainer runs jobset: both integrations",
        ),
        pytest.param(
            ["training-operator"],
            ["batch/job", "pod", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob",
             "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/jaxjob"],
            id="training-operator: the five kubeflow.org/v1 jobs",
        ),
        pytest.param(["kuberay"], ["batch/job", "pod", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"], id="kuberay"),
        pytest.param(["spark-operator"], ["batch/job", "pod", "sparkoperator.k8s.io/sparkapplication"], id="spark-operator"),
        pytest.param(["appwrapper"], ["batch/job", "pod", "workload.codeflare.dev/appwrapper"], id="appwrapper"),
    ],
)
def test_make_run_turns_on_the_integrations_its_operators_serve(names: list[str], expected: list[str]) -> None:
    assert operators.integrations_for(names) == expected


def test_every_operator_serves_an_integration_and_every_integration_names_an_operator() -> None:
    from kqueue.api.integrations.registry import DEFAULT_FRAMEWORKS, INTEGRATIONS

    for name in operators.OPERATORS:
        assert set(operators.integrations_for([name])) > set(DEFAULT_FRAMEWORKS), name
    assert {i.operator for i in INTEGRATIONS if i.operator} <= set(operators.OPERATORS)
