"""What a user sees through the real kubectl: printer columns, the `kqueue` category, explain.

The CRDs are applied from the chart (the same bytes as api/); objects are created directly, and
their status written through the status subresource where a column reads it, so these checks
do not depend on the controller. The controller-driven views (describe, watch) are in
test_dev_install.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kqueue.api import crds
from kqueue.localcluster.cluster import LocalCluster
from tests.chart.conftest import CHART

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def install_crds(cluster: LocalCluster) -> None:
    files = sorted((CHART / "crds").glob("*.yaml"))
    # Server-side: the schemas are too large for client-side apply's annotation.
    args = [a for f in files for a in ("-f", str(f))]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", *args)
    names = [f"crd/{f.stem}" for f in files]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


@pytest.fixture(scope="module")
def objects(cluster: LocalCluster) -> Iterator[dict[str, str]]:
    """One object of every kind; returns their names (and the namespace)."""
    install_crds(cluster)
    suffix = uuid.uuid4().hex[:6]
    names = {
        "ns": f"kubectl-{suffix}",
        "flavor": f"on-demand-{suffix}",
        "cohort": f"org-{suffix}",
        "cq": f"team-{suffix}",
        "wpc": f"high-{suffix}",
        "lq": "user-queue",
        "wl": "job-sample-1a2b3",
    }
    manifest = f"""
apiVersion: v1
kind: Namespace
metadata:
  name: {names["ns"]}
---
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata:
  name: {names["flavor"]}
spec:
  nodeLabels:
    instance-type: on-demand
---
apiVersion: kqueue.io/v1alpha1
kind: Cohort
metadata:
  name: {names["cohort"]}
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata:
  name: {names["cq"]}
spec:
  cohortName: {names["cohort"]}
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: {names["flavor"]}
      resources:
      - name: cpu
        nominalQuota: "4"
---
apiVersion: kqueue.io/v1alpha1
kind: WorkloadPriorityClass
metadata:
  name: {names["wpc"]}
value: 1000
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata:
  name: {names["lq"]}
  namespace: {names["ns"]}
spec:
  clusterQueue: {names["cq"]}
---
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata:
  name: {names["wl"]}
  namespace: {names["ns"]}
spec:
  queueName: {names["lq"]}
  podSets:
  - name: main
    count: 2
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: c
          image: registry.k8s.io/pause:3.10
          resources:
            requests:
              cpu: "1"
"""
    cluster.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield names
    finally:
        cluster.kubectl("delete", "namespace", names["ns"], "--wait=false", check=False)
        for kind, key in (
            ("clusterqueue", "cq"),
            ("cohort", "cohort"),
            ("resourceflavor", "flavor"),
            ("workloadpriorityclass", "wpc"),
        ):
            cluster.kubectl("delete", f"{kind}.kqueue.io", names[key], "--wait=false", check=False)


def _headers(table: str) -> list[str]:
    """Column titles of kubectl's table output (separated by two or more spaces)."""
    first = table.splitlines()[0]
    return re.split(r"\s{2,}", first.strip())


@pytest.mark.parametrize(
    "kind", ["ClusterQueue", "LocalQueue", "Workload", "WorkloadPriorityClass"]
)
def test_get_prints_the_printer_columns(
    cluster: LocalCluster, objects: dict[str, str], kind: str
) -> None:
    columns = crds.PRINTER_COLUMNS[kind]
    resource = f"{kind.lower()}s.kqueue.io".replace("classs", "classes")
    res = cluster.kubectl("get", resource, "-A")
    wide = cluster.kubectl("get", resource, "-A", "-o", "wide")
    normal = [c["name"].upper() for c in columns if not c.get("priority")]
    every = [c["name"].upper() for c in columns]
    headers, wide_headers = _headers(res.stdout), _headers(wide.stdout)
    for title in normal:
        assert title in headers, (title, res.stdout)
    for title in every:
        assert title in wide_headers, (title, wide.stdout)
    for title in set(every) - set(normal):
        assert title not in headers


def test_workload_columns_show_its_queue_and_admission(
    cluster: LocalCluster, objects: dict[str, str]
) -> None:
    ns, wl = objects["ns"], objects["wl"]
    now = "2026-01-01T00:00:00Z"
    status = {
        "status": {
            "admission": {
                "clusterQueue": objects["cq"],
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": objects["flavor"]},
                        "resourceUsage": {"cpu": "2"},
                        "count": 2,
                    }
                ],
            },
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
                for t, r, m in (
                    (
                        "QuotaReserved",
                        "QuotaReserved",
                        f"Quota reserved in ClusterQueue {objects['cq']}",
                    ),
                    ("Admitted", "Admitted", "The workload is admitted"),
                )
            ],
        }
    }
    cluster.kubectl(
        "patch",
        "workloads.kqueue.io",
        wl,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    res = cluster.kubectl("get", "workloads.kqueue.io", "-n", ns)
    headers = _headers(res.stdout)
    row = re.split(r"\s{2,}", res.stdout.splitlines()[1].strip())
    cells = dict(zip(headers, row, strict=False))
    assert cells["NAME"] == wl
    assert cells["QUEUE"] == objects["lq"]
    assert cells["RESERVED IN"] == objects["cq"]
    assert cells["ADMITTED"] == "True"
    # The short name reaches the same objects.
    assert wl in cluster.kubectl("get", "wl", "-n", ns).stdout


def test_get_several_kinds_at_once(cluster: LocalCluster, objects: dict[str, str]) -> None:
    res = cluster.kubectl(
        "get", "clusterqueues,localqueues,resourceflavors,workloads.kqueue.io", "-A"
    )
    out = res.stdout
    for name in (
        f"clusterqueue.kqueue.io/{objects['cq']}",
        f"localqueue.kqueue.io/{objects['lq']}",
        f"resourceflavor.kqueue.io/{objects['flavor']}",
        f"workload.kqueue.io/{objects['wl']}",
    ):
        assert name in out, out
    # Each kind's own table: its header appears above its rows.
    assert "COHORT" in out and "CLUSTERQUEUE" in out and "RESERVED IN" in out


def test_kqueue_category_lists_every_kind(cluster: LocalCluster, objects: dict[str, str]) -> None:
    out = cluster.kubectl("get", "kqueue", "-A", "-o", "name").stdout.split()
    for kind, key in (
        ("resourceflavor", "flavor"),
        ("clusterqueue", "cq"),
        ("cohort", "cohort"),
        ("workloadpriorityclass", "wpc"),
        ("localqueue", "lq"),
        ("workload", "wl"),
    ):
        assert f"{kind}.kqueue.io/{objects[key]}" in out, out
    # Built-in kinds are not in the category.
    assert not any(line.startswith(("pod/", "job.batch/")) for line in out)


def test_short_names_do_not_shadow_built_in_resources(cluster: LocalCluster, objects: Any) -> None:
    res = cluster.kubectl("api-resources", "-o", "name")
    builtin_short = cluster.kubectl("api-resources", "--api-group=", "--no-headers").stdout
    builtin = set()
    for line in builtin_short.splitlines():
        cols = line.split()
        builtin.add(cols[0])
        if len(cols) >= 5:
            builtin.update(cols[1].split(","))
    for path in sorted((CHART / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for short in crd["spec"]["names"].get("shortNames", []):
            assert short not in builtin, short
    assert "clusterqueues.kqueue.io" in res.stdout


def test_explain_prints_field_descriptions(cluster: LocalCluster, objects: Any) -> None:
    out = cluster.kubectl("explain", "clusterqueue.spec").stdout
    crd = yaml.safe_load((CHART / "crds" / "clusterqueues.kqueue.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "FIELDS:" in out
    flat = " ".join(out.split())
    for field in ("cohortName", "resourceGroups", "queueingStrategy", "preemption"):
        assert field in out
        description = " ".join(spec["properties"][field]["description"].split())
        # kubectl wraps text; compare the first words.
        assert " ".join(description.split()[:6]) in flat, (field, description)
    deeper = cluster.kubectl(
        "explain", "clusterqueue.spec.resourceGroups.flavors.resources.borrowingLimit"
    ).stdout
    assert "borrow" in deeper.lower()
    assert "DESCRIPTION:" in deeper
