"""The chart against the real local API server: server-side validation, install and uninstall."""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.localcluster.cluster import LocalCluster
from tests.chart.conftest import CHART, Helm
from tests.chart.test_render import DEV_CA, DEV_URL

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]

# Kinds whose CRDs (cert-manager, Prometheus Operator) the local cluster does not have.
THIRD_PARTY_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}
CLUSTER_SCOPED = (
    "clusterroles",
    "clusterrolebindings",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "customresourcedefinitions",
)


@pytest.fixture(scope="module")
def cluster_helm(cluster: LocalCluster, helm_bin: Path) -> Helm:
    return Helm(helm_bin, kubeconfig=cluster.kubeconfig_path)


@pytest.fixture
def release_namespace(cluster: LocalCluster) -> Iterator[str]:
    name = f"kqueue-chart-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def isolated(values: Obj) -> Obj:
    """Values that keep a test release's webhooks away from every other test's objects.

    The Job and Pod webhooks only see namespaces labelled for this release (none are), and the
    webhooks on kqueue's kinds ignore an unreachable endpoint quickly instead of failing them.
    """
    isolated_values: Obj = {
        "webhook": {
            "namespaceSelectorExpressions": [
                {"key": "kqueue.io/chart-test", "operator": "In", "values": ["none"]}
            ],
            "kqueueFailurePolicy": "Ignore",
            "kqueueTimeoutSeconds": 1,
        }
    }
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(isolated_values.get(key), dict):
            isolated_values[key] = {**isolated_values[key], **value}
        else:
            isolated_values[key] = value
    return isolated_values


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"replicaCount": 3, "metrics": {"serviceMonitor": {"enabled": True}}},
        {"certManager": {"enabled": True}},
        {"webhook": {"devUrl": DEV_URL, "caBundle": DEV_CA}},
    ],
    ids=["default", "ha", "cert-manager", "dev"],
)
def test_every_rendered_object_passes_server_side_validation(
    cluster: LocalCluster, helm: Helm, release_namespace: str, values: Obj
) -> None:
    """`kubectl apply --dry-run=server` of the rendered chart: schemas, RBAC, admission."""
    objs = helm.template(values, namespace=release_namespace)
    ours = [o for o in objs if o["kind"] not in THIRD_PARTY_KINDS]
    assert ours
    res = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--server-side",
        "-f",
        "-",
        input=yaml.safe_dump_all(ours),
        check=False,
    )
    assert res.returncode == 0, res.stderr
    applied = {line.split()[0] for line in res.stdout.splitlines() if line.strip()}
    assert len(applied) == len(ours), res.stdout


def test_helm_install_dry_run_server(
    cluster: LocalCluster, cluster_helm: Helm, release_namespace: str
) -> None:
    res = cluster_helm.run(
        "install",
        "kqueue",
        str(CHART),
        "--namespace",
        release_namespace,
        "--dry-run=server",
        "--output",
        "json",
        check=False,
    )
    assert res.returncode == 0, res.stderr
    release = json.loads(res.stdout)
    assert release["info"]["status"] == "pending-install"
    notes = release["info"]["notes"]
    # NOTES.txt takes the user to a first queue and job.
    assert "kind: ClusterQueue" in notes and "kqueue.io/queue-name: user-queue" in notes
    assert "kubectl get workloads.kqueue.io" in notes
    # The NOTES' example manifests are valid against the installed CRDs.
    start = notes.index("cat <<'YAML' | kubectl apply -f -")
    block = notes[start:].split("\n", 1)[1].split("  YAML", 1)[0]
    docs = [d for d in yaml.safe_load_all(textwrap.dedent(block)) if d]
    assert [d["kind"] for d in docs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    # Nothing was created.
    assert (
        cluster.kubectl(
            "get",
            "deploy,sa,cm",
            "-n",
            release_namespace,
            "-l",
            "app.kubernetes.io/instance=kqueue",
            "-o",
            "name",
        ).stdout.strip()
        == ""
    )


def _leftovers(cluster: LocalCluster, release: str) -> list[str]:
    res = cluster.kubectl(
        "get",
        ",".join(CLUSTER_SCOPED),
        "-l",
        f"app.kubernetes.io/instance={release}",
        "-o",
        "name",
    )
    return res.stdout.split()


def _wait(what: str, check: Any, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _check_permissions(cluster: LocalCluster, release: str, namespace: str) -> None:
    """What the certificate manager and leader election need, and no more (`auth can-i`).

    The development-mode test runs the controller itself under these permissions; these two
    needs only arise in a cluster (kqueue's own certificates), so they are checked here.
    """
    sa = f"system:serviceaccount:{namespace}:{release}-kqueue"
    secret = f"secrets/{release}-kqueue-webhook-server-cert"
    mutating = "mutatingwebhookconfigurations/kqueue-mutating-webhook-configuration"
    validating = "validatingwebhookconfigurations/kqueue-validating-webhook-configuration"
    expected = {
        ("get", secret, namespace): True,
        ("update", secret, namespace): True,
        ("create", "secrets", namespace): True,
        # MultiKueue reads the kubeconfig Secrets its MultiKueueClusters name (any name, in
        # the release namespace only), as Kueue's role does.
        ("get", "secrets/other", namespace): True,
        ("update", "secrets/other", namespace): False,
        ("list", "secrets", namespace): False,
        ("get", secret, "default"): False,
        ("create", "secrets", "default"): False,
        ("get", "leases/kqueue-leader", namespace): True,
        ("update", "leases/kqueue-leader", namespace): True,
        ("create", "leases", namespace): True,
        ("get", "leases/kqueue-leader", "default"): False,
        ("get", mutating, None): True,
        ("update", validating, None): True,
        ("update", "mutatingwebhookconfigurations/someone-else", None): False,
        ("delete", mutating, None): False,
        ("patch", "pods", "default"): True,
        ("delete", "pods", "default"): True,  # evicting plain pods (integration `pod`)
        ("patch", "pods#status", "default"): True,
        ("create", "pods", "default"): False,
        ("update", "workloads.kqueue.io#status", "default"): True,
        ("update", "workloads.kqueue.io", "default"): False,
        ("delete", "clusterqueues.kqueue.io", None): False,
        ("get", "configmaps", "default"): False,
        # Topology-aware admission reads Nodes (free capacity per domain), never writes them.
        ("list", "nodes", None): True,
        ("patch", "nodes", None): False,
    }
    wrong = []
    for (verb, resource, ns), allowed in expected.items():
        # "resource#subresource": kubectl takes the subresource as a flag.
        resource, _, sub = resource.partition("#")
        args = ["auth", "can-i", verb, resource, f"--as={sa}"]
        args += [f"--subresource={sub}"] if sub else []
        args += ["-n", ns] if ns else []
        got = cluster.kubectl(*args, check=False).stdout.strip() == "yes"
        if got != allowed:
            wrong.append(f"{verb} {resource} in {ns or 'cluster'}: {got}, want {allowed}")
    assert not wrong, "\n".join(wrong)


def test_install_then_uninstall_leaves_only_the_crds(
    cluster: LocalCluster, cluster_helm: Helm, release_namespace: str, tmp_path: Any
) -> None:
    """A real install (kwok plays the controller's pods), then uninstall.

    The controller does not really run here (kwok nodes run no containers), so this checks what
    Helm owns: every object is accepted and removed again; only the CRDs stay (Helm never
    deletes crds/, on purpose: that would delete every queue and workload).
    """
    release = f"kq-{uuid.uuid4().hex[:5]}"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(isolated({"replicaCount": 2})))
    try:
        cluster_helm.run(
            "install",
            release,
            str(CHART),
            "--namespace",
            release_namespace,
            "-f",
            str(values),
            "--wait",
            "--timeout",
            "120s",
            timeout=180,
        )
        names = _leftovers(cluster, release)
        assert f"clusterrole.rbac.authorization.k8s.io/{release}-kqueue-controller" in names
        assert (
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/"
            "kqueue-mutating-webhook-configuration" in names
        )
        deploy = json.loads(
            cluster.kubectl(
                "get",
                "deployment",
                f"{release}-kqueue-controller",
                "-n",
                release_namespace,
                "-o",
                "json",
            ).stdout
        )
        assert deploy["status"].get("availableReplicas") == 2
        pdb = cluster.kubectl("get", "pdb", "-n", release_namespace, "-o", "name").stdout
        assert f"{release}-kqueue-controller" in pdb
        crds = cluster.kubectl("get", "crd", "-o", "name").stdout
        assert "customresourcedefinition.apiextensions.k8s.io/clusterqueues.kqueue.io" in crds
        _check_permissions(cluster, release, release_namespace)
    finally:
        cluster_helm.run(
            "uninstall",
            release,
            "--namespace",
            release_namespace,
            "--wait",
            check=False,
            timeout=180,
        )
    assert _leftovers(cluster, release) == []
    left = cluster.kubectl(
        "get",
        "all,cm,sa,role,rolebinding,pdb",
        "-n",
        release_namespace,
        "-l",
        f"app.kubernetes.io/instance={release}",
        "-o",
        "name",
    ).stdout.split()
    assert left == []
    # The CRDs (and so every kqueue object) survive an uninstall.
    crds = cluster.kubectl("get", "crd", "-o", "name").stdout
    for plural in ("clusterqueues", "localqueues", "resourceflavors", "workloads"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.kqueue.io" in crds
