"""The visibility API through the real kube-apiserver's aggregation layer, and secure metrics.

kqueue runs on the host; the APIService ``v1alpha1.visibility.kqueue.io`` names a Service of
type ExternalName (``localhost``) in kqueue-system, so the aggregator, which has no kube-proxy
to route a ClusterIP here, connects to kqueue's visibility port directly, verifying its
certificate (issued for ``kqueue-visibility.kqueue-system.svc``) with the APIService's
caBundle. Callers are ServiceAccounts with tokens: the API server authenticates them and passes
them on as the front proxy; kqueue authorizes each request with a SubjectAccessReview.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1 import parse_time
from kqueue.cli.kubectl.main import cli as plugin
from kqueue.cli.main import cli as kqueue_cli
from kqueue.controller.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, WORKLOADS
from kqueue.controller.visibility_api import SERVICE_NAME
from kqueue.controller.webhook_server.certs import generate_bundle, service_hosts, write_cert_dir
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    KQUEUE_NAMESPACE,
    Api,
    after_second_of,
    cluster_queue,
    condition,
    eventually,
    flavor,
    free_port,
    is_true,
    job,
    local_queue,
    pending_reason,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_kubectl_plugin import header_of, table_rows

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
APISERVICE = "v1alpha1.visibility.kqueue.io"
BASE = "/apis/visibility.kqueue.io/v1alpha1"


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    work = Path(tmp_path_factory.mktemp("kqueue-visibility"))
    certs = work / "visibility-certs"
    bundle = generate_bundle([*service_hosts(SERVICE_NAME, KQUEUE_NAMESPACE), "localhost"])
    write_cert_dir(certs, bundle)
    port = free_port()
    overrides = {
        "metrics": {"secure": True},
        "visibility": {"bindAddress": f"127.0.0.1:{port}", "certDir": str(certs)},
        # Predicted starts recomputed often enough for a test to see them move.
        "predictedStart": {"interval": "2s"},
    }
    for proc in configured_kqueue(cluster, work, overrides):
        _register(cluster, port, bundle.ca_pem)
        try:
            yield proc
        finally:
            cluster.kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)
            cluster.kubectl(
                "delete",
                "service",
                SERVICE_NAME,
                "-n",
                KQUEUE_NAMESPACE,
                "--ignore-not-found",
                check=False,
            )


def _register(cluster: LocalCluster, port: int, ca_pem: bytes) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE_NAME, "namespace": KQUEUE_NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    }
    apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": APISERVICE},
        "spec": {
            "group": "visibility.kqueue.io",
            "version": "v1alpha1",
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "caBundle": base64.b64encode(ca_pem).decode(),
            "service": {"name": SERVICE_NAME, "namespace": KQUEUE_NAMESPACE, "port": port},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([service, apiservice]))
    cluster.kubectl(
        "wait", "--for=condition=Available", "--timeout=60s", f"apiservice/{APISERVICE}"
    )


# -- callers -------------------------------------------------------------------------------------


def _get(url: str, token: str | None, *, verify: Path | None) -> tuple[int, str]:
    ctx = (
        ssl.create_default_context(cafile=str(verify))
        if verify
        else ssl._create_unverified_context()
    )
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=15) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


async def via_apiserver(cluster: LocalCluster, path: str, token: str) -> tuple[int, Obj]:
    """GET ``path`` from the kube-apiserver as the token's user."""
    code, body = await asyncio.to_thread(
        _get, f"{cluster.server_url}{path}", token, verify=cluster.ca_path
    )
    return code, json.loads(body)


def _service_account(
    cluster: LocalCluster, namespace: str, name: str, rules: list[Obj], *, cluster_wide: bool
) -> str:
    """A ServiceAccount bound to ``rules`` (a Role in ``namespace`` or a ClusterRole); its token."""
    cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
    kind = "ClusterRole" if cluster_wide else "Role"
    role_name = f"{namespace}-{name}" if cluster_wide else name
    meta: Obj = {"name": role_name}
    if not cluster_wide:
        meta["namespace"] = namespace
    binding: Obj = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": f"{kind}Binding",
        "metadata": dict(meta),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "rules": rules,
    }
    if rules:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([role, binding]))
    return cluster.kubectl("create", "token", name, "-n", namespace).stdout.strip()


def _cleanup_cluster_roles(cluster: LocalCluster, namespace: str, *names: str) -> None:
    for name in names:
        for kind in ("clusterrolebinding", "clusterrole"):
            cluster.kubectl(
                "delete", kind, f"{namespace}-{name}", "--ignore-not-found", check=False
            )


async def _pending(api: Api, namespace: str, job_name: str) -> Obj:
    return await api.wait_workload(
        namespace, job_name, lambda w: pending_reason(w) is not None, what=f"{job_name} pending"
    )


# -- tests ---------------------------------------------------------------------------------------


async def test_two_identities_see_what_rbac_allows_with_simulates_positions(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    other = f"{namespace}-b"
    cluster.kubectl("create", "namespace", other)
    rf, cq = unique("rf"), unique("cq")
    try:
        await api.apply(flavor(rf, "on-demand"))
        await api.apply(cluster_queue(cq, [(rf, "1")]))
        await api.apply(local_queue("a", namespace, cq))
        await api.apply(local_queue("b", other, cq))
        await api.apply(job("running", namespace, "a"))
        await api.wait_workload(
            namespace, "running", lambda w: is_true(w, c.ADMITTED), what="running admitted"
        )
        # Creation order p1 (a), p2 (b), p3 (a), in distinct seconds: queue order is the same.
        last = None
        for name, ns, queue in (("p1", namespace, "a"), ("p2", other, "b"), ("p3", namespace, "a")):
            if last is not None:
                await after_second_of(last["metadata"]["creationTimestamp"])
            await api.apply(job(name, ns, queue))
            last = await _pending(api, ns, name)
        names = {
            j: (await api.workload_of(ns, j) or {})["metadata"]["name"]
            for j, ns in (("p1", namespace), ("p2", other), ("p3", namespace))
        }

        lq_reader = await asyncio.to_thread(
            _service_account,
            cluster,
            namespace,
            "lq-reader",
            [
                {
                    "apiGroups": ["visibility.kqueue.io"],
                    "resources": ["localqueues/pendingworkloads"],
                    "verbs": ["get"],
                }
            ],
            cluster_wide=False,
        )
        cq_reader = await asyncio.to_thread(
            _service_account,
            cluster,
            namespace,
            "cq-reader",
            [
                {
                    "apiGroups": ["visibility.kqueue.io"],
                    "resources": ["clusterqueues/pendingworkloads"],
                    "verbs": ["get"],
                }
            ],
            cluster_wide=True,
        )
        lq_path = f"{BASE}/namespaces/{namespace}/localqueues/a/pendingworkloads"
        other_lq_path = f"{BASE}/namespaces/{other}/localqueues/b/pendingworkloads"
        cq_path = f"{BASE}/clusterqueues/{cq}/pendingworkloads"

        # The LocalQueue reader: its namespace's queue only.
        code, body = await via_apiserver(cluster, lq_path, lq_reader)
        assert code == 200, body
        assert body["kind"] == "PendingWorkloadsSummary"
        assert [
            (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in body["items"]
        ] == [(names["p1"], 0, 0), (names["p3"], 2, 1)]
        for path in (other_lq_path, cq_path):
            code, body = await via_apiserver(cluster, path, lq_reader)
            assert code == 403, (path, body)
            assert body["reason"] == "Forbidden"
            assert f"system:serviceaccount:{namespace}:lq-reader" in body["message"]

        # The ClusterQueue reader: the whole queue, in the order kqueue admits it.
        code, body = await via_apiserver(cluster, cq_path, cq_reader)
        assert code == 200, body
        got = [
            (
                i["metadata"]["namespace"],
                i["metadata"]["name"],
                i["localQueueName"],
                i["positionInClusterQueue"],
                i["positionInLocalQueue"],
                i["priority"],
            )
            for i in body["items"]
        ]
        assert got == [
            (namespace, names["p1"], "a", 0, 0, 0),
            (other, names["p2"], "b", 1, 0, 0),
            (namespace, names["p3"], "a", 2, 1, 0),
        ]
        assert all(i["reason"] == c.WAITING_FOR_QUOTA and i["message"] for i in body["items"])
        code, body = await via_apiserver(cluster, lq_path, cq_reader)
        assert code == 403, body
        # Paging: offset and limit slice the queue, positions stay the queue's.
        code, body = await via_apiserver(cluster, f"{cq_path}?offset=1&limit=1", cq_reader)
        assert code == 200, body
        assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]] == [
            (names["p2"], 1)
        ]

        # The same objects through `kqueue simulate`, each workload running a minute: after
        # the running one, they are admitted in the order of their positions.
        docs = [await api.kube.get(RESOURCE_FLAVORS, rf), await api.kube.get(CLUSTER_QUEUES, cq)]
        for ns in (namespace, other):
            for resource, kind in ((LOCAL_QUEUES, "LocalQueue"), (WORKLOADS, "Workload")):
                for item in await api.kube.list(resource, namespace=ns):
                    doc = {**item, "apiVersion": c.API_VERSION, "kind": kind}
                    if kind == "Workload":
                        doc["metadata"].setdefault("annotations", {})[
                            "simulate.kqueue.io/run-time"
                        ] = "1m"
                    docs.append(doc)
        result = await asyncio.to_thread(
            CliRunner().invoke,
            kqueue_cli,
            ["simulate", "-o", "json", "-"],
            input=yaml.safe_dump_all(docs),
        )
        assert result.exit_code == 0, result.output
        reserved = [
            e["workload"]
            for e in json.loads(result.stdout)["events"]
            if e["type"] == "QuotaReserved"
        ]
        by_position = [f"{ns}/{name}" for ns, name, *_ in got]
        assert reserved == by_position
    finally:
        await asyncio.to_thread(_cleanup_cluster_roles, cluster, namespace, "cq-reader")
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)


BAD_INPUT = [
    ("unknown ClusterQueue", "cq:no-such-cq", 404, ['ClusterQueue "no-such-cq" not found']),
    ("unknown LocalQueue", "lq:no-such-lq", 404, ['LocalQueue "{ns}/no-such-lq" not found']),
    ("negative limit", "cq?limit=-1", 400, ['limit="-1"', "non-negative integer"]),
    ("non-numeric limit", "cq?limit=ten", 400, ['limit="ten"', "non-negative integer"]),
    ("negative offset", "lq?offset=-3", 400, ['offset="-3"', "non-negative integer"]),
    ("non-numeric offset", "cq?offset=1.5", 400, ['offset="1.5"', "non-negative integer"]),
]


@pytest.mark.parametrize(
    ("name", "query", "code", "names"), BAD_INPUT, ids=[case[0] for case in BAD_INPUT]
)
async def test_bad_input_is_named(
    api: Api,
    cluster: LocalCluster,
    namespace: str,
    name: str,
    query: str,
    code: int,
    names: list[str],
) -> None:
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))

    async def known() -> bool:
        # The LocalQueue reached kqueue's engine (its status is written from there).
        lq = await api.kube.get(LOCAL_QUEUES, "q", namespace)
        return bool((lq.get("status") or {}).get("conditions"))

    await eventually(known, what="the LocalQueue known to kqueue")
    target, _, params = query.partition("?")
    kind, _, qname = target.partition(":")
    if kind == "cq":
        path = f"{BASE}/clusterqueues/{qname or cq}/pendingworkloads"
    else:
        path = f"{BASE}/namespaces/{namespace}/localqueues/{qname or 'q'}/pendingworkloads"
    if params:
        path += f"?{params}"
    admin = await asyncio.to_thread(
        _service_account,
        cluster,
        namespace,
        "admin-reader",
        [
            {
                "apiGroups": ["visibility.kqueue.io"],
                "resources": ["clusterqueues/pendingworkloads", "localqueues/pendingworkloads"],
                "verbs": ["get"],
            }
        ],
        cluster_wide=True,
    )
    try:
        got, body = await via_apiserver(cluster, path, admin)
    finally:
        await asyncio.to_thread(_cleanup_cluster_roles, cluster, namespace, "admin-reader")
    assert got == code, (name, body)
    assert body["kind"] == "Status" and body["code"] == code
    for text in names:
        assert text.format(ns=namespace) in body["message"], (name, body["message"])


async def test_discovery_and_the_plugin_use_the_served_api(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    resources = await asyncio.to_thread(
        cluster.kubectl, "api-resources", "--api-group=visibility.kqueue.io", "-o", "name"
    )
    # Only subresources are served: kubectl lists none, and clusterqueues stays kqueue.io's.
    assert resources.returncode == 0, resources.stderr
    raw = await asyncio.to_thread(cluster.kubectl, "get", "--raw", BASE)
    assert {r["name"] for r in json.loads(raw.stdout)["resources"]} == {
        "clusterqueues/pendingworkloads",
        "localqueues/pendingworkloads",
    }
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("running", namespace, "q"))
    await api.wait_workload(namespace, "running", lambda w: is_true(w, c.ADMITTED), what="admitted")
    await api.apply(job("waiting", namespace, "q"))
    waiting = await _pending(api, namespace, "waiting")

    def run() -> Any:
        return CliRunner().invoke(
            plugin,
            [
                "pending",
                "clusterqueue",
                cq,
                "-o",
                "json",
                "--kubeconfig",
                str(cluster.kubeconfig_path),
            ],
            prog_name="kubectl-kqueue",
        )

    result = await asyncio.to_thread(run)
    assert result.exit_code == 0, result.output
    assert "from the visibility API visibility.kqueue.io/v1alpha1" in result.stderr
    items = json.loads(result.stdout)["items"]
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in items] == [
        (waiting["metadata"]["name"], 0)
    ]


async def _estimated_starts(cluster: LocalCluster, path: str) -> dict[str, datetime]:
    raw = await asyncio.to_thread(cluster.kubectl, "get", "--raw", path)
    assert raw.returncode == 0, raw.stderr
    return {
        i["metadata"]["name"]: parse_time(i["estimatedStartTime"])
        for i in json.loads(raw.stdout)["items"]
        if "estimatedStartTime" in i
    }


async def test_an_eta_is_served_and_moves_earlier_when_a_job_finishes_early(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    """Three Jobs of 1 cpu, each allowed 10 minutes, on a queue of 1 cpu: the second is
    predicted to start when the first's 10 minutes are up, the third 10 minutes later. The
    first finishes after a few seconds: the second starts, and the third's ETA moves earlier
    (to the second's start plus 10 minutes)."""
    rf, cq = unique("rf"), unique("cq")
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cluster_queue(cq, [(rf, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    limit = {c.MAX_EXEC_TIME_SECONDS_LABEL: "600"}
    await api.apply(job("first", namespace, "q", labels=limit, complete_after="20s"))
    first = await api.wait_workload(
        namespace, "first", lambda w: is_true(w, c.ADMITTED), what="first admitted"
    )
    first_start = parse_time(condition(first, c.ADMITTED)["lastTransitionTime"])  # type: ignore[index]
    await api.apply(job("second", namespace, "q", labels=limit))
    second = await _pending(api, namespace, "second")
    await after_second_of(second["metadata"]["creationTimestamp"])
    await api.apply(job("third", namespace, "q", labels=limit))
    third = await _pending(api, namespace, "third")
    names = {j: w["metadata"]["name"] for j, w in (("second", second), ("third", third))}
    path = f"{BASE}/namespaces/{namespace}/localqueues/q/pendingworkloads"

    async def both() -> dict[str, datetime] | None:
        got = await _estimated_starts(cluster, path)
        return got if set(got) == set(names.values()) else None

    before = await eventually(both, what="estimatedStartTime on both pending items", within=30)
    assert abs((before[names["second"]] - (first_start + timedelta(minutes=10))).total_seconds()) <= 2
    assert abs((before[names["third"]] - (first_start + timedelta(minutes=20))).total_seconds()) <= 2

    # kubectl kqueue pending (through the visibility API) has the ETA column.
    result = await asyncio.to_thread(
        CliRunner().invoke,
        plugin,
        ["pending", "lq", "q", "-n", namespace, "--kubeconfig", str(cluster.kubeconfig_path)],
        prog_name="kubectl-kqueue",
    )
    assert result.exit_code == 0, result.output
    header = [h.strip() for h in result.stdout.splitlines()[0].split("   ") if h.strip()]
    eta_at = header.index("ETA")
    etas = {
        line.split()[3]: [cell.strip() for cell in line.split("   ") if cell.strip()][eta_at]
        for line in result.stdout.splitlines()[1:]
    }
    # kubectl's human durations: "9m56s" under 10 minutes, whole minutes above.
    assert etas[names["second"]].startswith("9m") or etas[names["second"]] == "10m", result.stdout
    assert etas[names["third"]] in {"19m", "20m"}, result.stdout

    # kubectl kqueue list workloads (the plugin's own forecast from the cluster's objects), and
    # kqueue explain saying when and after what.
    listed = await asyncio.to_thread(
        CliRunner().invoke,
        plugin,
        ["list", "workloads", "-n", namespace, "--kubeconfig", str(cluster.kubeconfig_path)],
        prog_name="kubectl-kqueue",
    )
    assert listed.exit_code == 0, listed.output
    eta_column = header_of(listed.stdout).index("ETA")
    listed_etas = {row[0]: row[eta_column] for row in table_rows(listed.stdout)}
    assert listed_etas[names["second"]].startswith("9m") or listed_etas[names["second"]] == "10m"
    assert listed_etas[names["third"]] in {"19m", "20m"}, listed.stdout
    explained = await asyncio.to_thread(
        CliRunner().invoke,
        kqueue_cli,
        ["explain", f"{namespace}/{names['third']}", "--kubeconfig", str(cluster.kubeconfig_path)],
    )
    assert explained.exit_code == 0, explained.output
    assert f"when {namespace}/{names['second']} finishes" in explained.stdout, explained.stdout
    assert "expected to start around" in explained.stdout

    # The first Job finishes early: the second starts, the third's ETA moves earlier.
    await api.wait_workload(
        namespace, "first", lambda w: is_true(w, c.FINISHED), what="first finished", within=90
    )
    second = await api.wait_workload(
        namespace, "second", lambda w: is_true(w, c.ADMITTED), what="second admitted"
    )
    second_start = parse_time(condition(second, c.ADMITTED)["lastTransitionTime"])  # type: ignore[index]

    async def moved() -> dict[str, datetime] | None:
        got = await _estimated_starts(cluster, path)
        third_eta = got.get(names["third"])
        return got if third_eta is not None and third_eta < before[names["third"]] else None

    after = await eventually(moved, what="the third's ETA earlier", within=30)
    assert set(after) == {names["third"]}
    assert abs((after[names["third"]] - (second_start + timedelta(minutes=10))).total_seconds()) <= 2
    assert before[names["third"]] - after[names["third"]] >= timedelta(minutes=9)


async def test_metrics_need_a_token_allowed_to_get_metrics(
    kqueue: ConfiguredKqueue, cluster: LocalCluster, namespace: str
) -> None:
    url = f"https://127.0.0.1:{kqueue.metrics_port}/metrics"
    # The self-signed certificate: the scraper skips verification, as with controller-runtime.
    code, body = await asyncio.to_thread(_get, url, None, verify=None)
    assert code == 401, body
    code, body = await asyncio.to_thread(_get, url, "not-a-token", verify=None)
    assert code == 401, body
    nobody = await asyncio.to_thread(
        _service_account, cluster, namespace, "nobody", [], cluster_wide=True
    )
    code, body = await asyncio.to_thread(_get, url, nobody, verify=None)
    assert code == 403, body
    assert f"user=system:serviceaccount:{namespace}:nobody" in body
    reader = await asyncio.to_thread(
        _service_account,
        cluster,
        namespace,
        "metrics-reader",
        [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        cluster_wide=True,
    )
    try:
        code, body = await asyncio.to_thread(_get, url, reader, verify=None)
    finally:
        await asyncio.to_thread(_cleanup_cluster_roles, cluster, namespace, "metrics-reader")
    assert code == 200, body
    assert "kqueue_admission_attempts_total" in body
    # Plain HTTP gets no answer from the HTTPS port.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        await asyncio.to_thread(
            urllib.request.urlopen, f"http://127.0.0.1:{kqueue.metrics_port}/metrics", timeout=5
        )


async def test_front_proxy_headers_need_the_front_proxy_certificate(
    kqueue: ConfiguredKqueue, cluster: LocalCluster
) -> None:
    """Straight to kqueue's port, X-Remote-User without the request-header CA's client
    certificate is not believed: the caller is unauthenticated."""
    port = int(kqueue.overrides["visibility"]["bindAddress"].rpartition(":")[2])

    def call() -> tuple[int, str]:
        req = urllib.request.Request(
            f"https://127.0.0.1:{port}{BASE}/clusterqueues/x/pendingworkloads"
        )
        req.add_header("X-Remote-User", "system:admin")
        req.add_header("X-Remote-Group", "system:masters")
        try:
            with urllib.request.urlopen(
                req, context=ssl._create_unverified_context(), timeout=10
            ) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()

    code, body = await asyncio.to_thread(call)
    assert code == 401, body
