"""The chart installed for real in development mode, with kqueue running on the host.

`helm install` creates everything but the Deployment: the webhook configurations point at
``https://127.0.0.1:<port>`` (the API server runs on this host) with our CA, and the
ServiceAccount, RBAC and Configuration are the chart's. ``kqueue run`` then runs as that
ServiceAccount (a token from the TokenRequest API), with the Configuration read back from the
chart's ConfigMap, so the chart's RBAC is proven sufficient by a real controller doing real work
(any 403 fails the test). A Job goes from pending to admitted to finished through kubectl,
watched with ``kubectl get workloads.kqueue.io -w`` and explained by ``kubectl describe``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION
from tests.chart.devrelease import (
    RELEASE,
    DevRelease,
    Watch,
    condition,
    dev_release,
    kubectl_json,
    wait_for,
)
from tests.chart.test_install import CLUSTER_SCOPED

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


@pytest.fixture
def team_namespace(cluster: LocalCluster) -> Iterator[str]:
    name = f"team-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def dev(
    cluster: LocalCluster,
    helm_bin: Path,
    team_namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[DevRelease]:
    with dev_release(cluster, helm_bin, tmp_path, [team_namespace], request) as release:
        yield release


def test_job_admitted_end_to_end_through_the_chart_in_development_mode(
    cluster: LocalCluster, dev: DevRelease, team_namespace: str
) -> None:
    ns, suffix = team_namespace, team_namespace.rsplit("-", 1)[1]
    flavor, cq = f"on-demand-{suffix}", f"team-{suffix}"
    dev.install()

    # Nothing runs in the cluster; the webhook configurations point at the host.
    assert cluster.kubectl("get", "deploy,svc", "-n", dev.namespace, "-o", "name").stdout == ""
    hooks = kubectl_json(
        cluster, "get", "mutatingwebhookconfiguration", "kqueue-mutating-webhook-configuration"
    )["webhooks"]
    assert all(
        h["clientConfig"]["url"].startswith(f"https://127.0.0.1:{dev.webhook_port}/") for h in hooks
    )
    dev.start()

    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=f"""
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata:
  name: {flavor}
spec:
  nodeLabels:
    instance-type: on-demand
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata:
  name: {cq}
spec:
  namespaceSelector: {{}}
  # Held at first, so the Job is seen pending; resumed below.
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: {flavor}
      resources:
      - name: cpu
        nominalQuota: "2"
      - name: memory
        nominalQuota: 4Gi
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata:
  name: user-queue
  namespace: {ns}
spec:
  clusterQueue: {cq}
""",
    )
    watch = Watch(
        [
            str(cluster.bin_dir / "kubectl"),
            f"--kubeconfig={cluster.kubeconfig_path}",  # type: ignore[operator]
            "get",
            "workloads.kqueue.io",
            "-n",
            ns,
            "-w",
        ]
    )
    watch.start()
    try:
        _run_job(cluster, dev, ns, flavor, cq, watch)
    finally:
        watch.stop()
        # Deleted while kqueue runs, so it can lift its resource-in-use finalizers.
        cluster.kubectl("delete", "job", "--all", "-n", ns, "--wait=true", check=False)
        cluster.kubectl("delete", "localqueue", "user-queue", "-n", ns, check=False)
        cluster.kubectl("delete", "clusterqueue", cq, "--timeout=30s", check=False)
        cluster.kubectl("delete", "resourceflavor", flavor, "--timeout=30s", check=False)

    # kqueue did all of this with the chart's permissions and nothing more.
    assert dev.forbidden_in_log() == []

    dev.uninstall()
    left = cluster.kubectl(
        "get",
        ",".join(CLUSTER_SCOPED),
        "-l",
        f"app.kubernetes.io/instance={RELEASE}",
        "-o",
        "name",
    ).stdout.split()
    assert left == []


def _run_job(
    cluster: LocalCluster, dev: DevRelease, ns: str, flavor: str, cq: str, watch: Watch
) -> None:
    res = cluster.kubectl(
        "create", "-o", "json", "-f", "-", input=yaml.safe_dump(_job("sample", ns))
    )
    job = json.loads(res.stdout)
    # The mutating webhook on the host gated the Job's pods.
    template = job["spec"]["template"]
    assert {"name": "kqueue.io/admission"} in template["spec"]["schedulingGates"]

    def workload() -> Obj | None:
        items = kubectl_json(cluster, "get", "workloads.kqueue.io", "-n", ns)["items"]
        return items[0] if items else None

    def pending() -> Obj | None:
        wl = workload()
        cond = condition(wl, "QuotaReserved") if wl else None
        return wl if cond is not None and cond["status"] == "False" else None

    wl = wait_for("a pending Workload", pending)
    name = wl["metadata"]["name"]
    described = cluster.kubectl("describe", "workloads.kqueue.io", name, "-n", ns).stdout
    assert "QuotaReserved" in described and cq in described, described

    cluster.kubectl(
        "patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}'
    )

    def finished() -> Obj | None:
        wl = workload()
        cond = condition(wl, "Finished") if wl else None
        return wl if cond is not None and cond["status"] == "True" else None

    wl = wait_for("the Workload to finish", finished, timeout=90)
    assert wl["status"]["admission"]["clusterQueue"] == cq
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == flavor
    job = kubectl_json(cluster, "get", "job", "sample", "-n", ns)
    assert condition(job, "Complete") is not None

    # describe shows the conditions and the events that explain them.
    described = cluster.kubectl("describe", "workloads.kqueue.io", name, "-n", ns).stdout
    for text in (
        "Conditions:",
        "Admitted",
        "Finished",
        "Events:",
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cq}",
    ):
        assert text in described, (text, described)

    # A Job bigger than the ClusterQueue can ever hold: the message gives the numbers, and
    # `kqueue explain` on the live cluster says what is missing.
    cluster.kubectl(
        "create",
        "-f",
        "-",
        input=yaml.safe_dump(_job("too-big", ns, parallelism=4, cpu="1")),
    )

    def too_big() -> str | None:
        items = kubectl_json(cluster, "get", "workloads.kqueue.io", "-n", ns)["items"]
        for item in items:
            if item["metadata"]["ownerReferences"][0]["name"] == "too-big":
                cond = condition(item, "QuotaReserved")
                if cond and cond["reason"] == "ExceedsMaxQuota":
                    return str(item["metadata"]["name"])
        return None

    big = wait_for("the too big Job to pend with ExceedsMaxQuota", too_big)
    described = cluster.kubectl("describe", "workloads.kqueue.io", big, "-n", ns).stdout
    assert "ExceedsMaxQuota" in described and "(4 > 2)" in " ".join(described.split()), described
    explained = subprocess.run(
        [
            sys.executable,
            "-m",
            "kqueue",
            "explain",
            f"{ns}/{big}",
            f"--kubeconfig={cluster.kubeconfig_path}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert explained.returncode == 0, explained.stderr
    assert "ExceedsMaxQuota" in explained.stdout and "missing 2" in explained.stdout, (
        explained.stdout
    )

    # The watch saw the Workload pending, then admitted, then finished.
    wait_for(
        "the watch to print the finished Workload",
        lambda: any(re.search(r"\bTrue\s+True\b", line) for line in watch.lines),
        timeout=15,
    )
    rows = [re.split(r"\s{2,}", line.strip()) for line in watch.lines if line.startswith(name)]
    header = re.split(r"\s{2,}", watch.lines[0].strip())
    states = []
    for row in rows:
        cells = dict(zip(header, row, strict=False))
        state = (
            "finished"
            if cells.get("FINISHED") == "True"
            else "admitted"
            if cells.get("ADMITTED") == "True"
            else "pending"
        )
        if not states or states[-1] != state:
            states.append(state)
    assert states == ["pending", "admitted", "finished"], watch.lines


def _job(name: str, ns: str, *, parallelism: int = 2, cpu: str = "500m") -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"kqueue.io/queue-name": "user-queue"},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {"annotations": {COMPLETE_AFTER_ANNOTATION: "3s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                        }
                    ],
                },
            },
        },
    }
