"""Security: the chart's RBAC against what the controller really calls; TLS; no secrets logged.

The chart is installed for real (development mode: everything but the Deployment) and
``kqueue run`` runs on the host as the chart's ServiceAccount (a TokenRequest token), bound to
nothing but the chart's ClusterRole and Role. Its requests go through a recording proxy that
forwards the token unchanged, so the API server authorizes each as the ServiceAccount and the
proxy learns every (verb, resource) kqueue used. A run of Jobs with preemptions, a
ClusterQueue deleted while in use, and a restart (lease release and re-acquire) must see no 403,
and every permission the chart grants must have been used, or be listed below with the reason
a short run cannot reach it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import re
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES, JOBS
from kqueue.localcluster.cluster import LocalCluster
from tests.chart.devrelease import RELEASE, DevRelease, dev_release
from tests.controller_e2e.harness import Api, install_crds, job
from tests.reliability.faults import (
    FaultProxy,
    Scenario,
    api,
    converged,
    final_checks,
    record,
    running,
    wait_until,
)

pytestmark = pytest.mark.cluster
__all__ = ["api"]  # fixture

# Granted, and needed, but not a request kqueue sends in a short run on this control plane.
NOT_REQUESTED: dict[tuple[str, str], str] = {
    **{
        (verb, "scheduling.k8s.io/podgroups"): (
            "the gang-scheduling hand-off (kqueue/controller/gang.py) calls them only for a "
            "multi-pod workload it admits, which the short RBAC run may not release "
            "(tests/gang_e2e exercises them)"
        )
        for verb in ("create", "delete", "get", "patch")
    },
    **{
        (verb, "resource.k8s.io/resourceclaimtemplates"): (
            "read only with resources.deviceClassMappings configured (DRA quota, "
            "kqueue/controller/claim_templates.py); the RBAC run configures none"
        )
        for verb in ("list", "watch")
    },
    **{
        (verb, f"resource.k8s.io/{kind}"): (
            "read only with resources.deviceClassMappings configured (DeviceClasses) and counter "
            "sources in them (ResourceSlices), docs/dra.md; the RBAC run configures none"
        )
        for verb in ("list", "watch")
        for kind in ("resourceslices", "deviceclasses")
    },
    ("update", "kqueue.io/cohorts/status"): (
        "a Cohort's status is its fair-sharing weightedShare, written only with fair sharing on; "
        "the RBAC run does not configure fair sharing"
    ),
    ("update", "batch/jobs/finalizers"): (
        "checked by the OwnerReferencesPermissionEnforcement admission plugin when kqueue "
        "creates a Workload owned by a Job (blockOwnerDeletion); an authorization check on "
        "another request, never a request of its own"
    ),
    ("delete", "kqueue.io/workloads"): (
        "a pending replacement slice of an elastic Job that scaled back before it was admitted "
        "(kqueue/controller/integrations/job/elastic.py); the RBAC run has no elastic Job"
    ),
    ("get", "kqueue.io/workloads"): (
        "re-reading a Workload after a conflicting eviction write (scheduler), and in the "
        "elastic-slice and readiness controllers; reached here only if an eviction meets a 409"
    ),
    ("delete", "pods"): (
        "evicting a plain Pod or pod group (kqueue/controller/integrations/eviction.py: the pods are deleted "
        "once marked DisruptionTarget); the RBAC run evicts Jobs only"
    ),
    ("patch", "pods/status"): (
        "the DisruptionTarget condition written on a plain Pod before it is deleted on eviction, "
        "and a topology-placed pod pinned to a lost node marked Failed "
        "(kqueue/controller/pinned_pods.py); the RBAC run evicts Jobs only and loses no node"
    ),
    **{
        (verb, "autoscaling.x-k8s.io/provisioningrequests"): (
            "the ProvisioningRequest admission check (kqueue/controller/admission_checks/"
            "provisioning); the RBAC run has no AdmissionCheck (tests/controller_e2e/"
            "test_admission_checks.py exercises it)"
        )
        for verb in ("create", "delete", "get", "list")
    },
    **{
        (verb, "podtemplates"): (
            "the pod templates of a ProvisioningRequest; the RBAC run has no AdmissionCheck"
        )
        for verb in ("create", "delete", "list")
    },
    ("update", "kqueue.io/admissionchecks/status"): (
        "the Active condition of a built-in AdmissionCheck; the RBAC run has none"
    ),
    ("get", "kqueue.io/admissionchecks"): (
        "the get-modify-write of a built-in AdmissionCheck's status; the RBAC run has none"
    ),
    ("get", "kqueue.io/multikueueclusters"): (
        "the get-modify-write of a MultiKueueCluster's Active condition; the RBAC run has no "
        "MultiKueueCluster (tests/controller_e2e/test_multikueue.py exercises it)"
    ),
    ("update", "kqueue.io/multikueueclusters/status"): (
        "a MultiKueueCluster's Active condition; the RBAC run has none"
    ),
    ("get", "secrets"): (
        "a MultiKueueCluster's kubeconfig Secret (and, with internal certificates, the webhook "
        "certificate Secret); the RBAC run has no MultiKueueCluster"
    ),
    ("update", "batch/jobs/status"): (
        "MultiKueue copies a dispatched Job's status back from its worker; the RBAC run "
        "dispatches nothing"
    ),
    ("get", "batch/jobs"): (
        "MultiKueue reads a dispatched Job by name; the RBAC run dispatches nothing"
    ),
    ("update", "pods/status"): (
        "MultiKueue copies a dispatched plain pod's status back from its worker (patch, the "
        "other pods/status verb, marks a pod Failed or DisruptionTarget); the RBAC run "
        "dispatches nothing"
    ),
    ("get", "pods"): (
        "MultiKueue reads a dispatched plain pod by name; the RBAC run dispatches nothing"
    ),
    ("update", "pods/finalizers"): (
        "checked by the OwnerReferencesPermissionEnforcement admission plugin when kqueue creates "
        "a Workload owned by a plain Pod (blockOwnerDeletion); the RBAC run has no plain Pods"
    ),
}

SECRET_PATTERNS = [
    re.compile(r"BEGIN [A-Z ]*PRIVATE KEY"),
    re.compile(r"(?i)bearer\s+[A-Za-z0-9._-]{20,}"),
    re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\."),  # a JWT (service-account token)
]


class ProxiedRelease(DevRelease):
    """The development-mode release, with kqueue talking to the API server through a proxy."""

    proxy_url: str = ""

    def kubeconfig_as_service_account(self) -> Path:
        path = super().kubeconfig_as_service_account()
        cfg = yaml.safe_load(path.read_text())
        cfg["clusters"][0]["cluster"]["server"] = self.proxy_url
        path.write_text(yaml.safe_dump(cfg))
        return path

    def token(self) -> str:
        cfg = yaml.safe_load((self.work_dir / "kqueue.kubeconfig").read_text())
        return str(cfg["users"][0]["user"]["token"])


@pytest.fixture
def release(
    cluster: LocalCluster,
    helm_bin: Path,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[DevRelease]:
    install_crds(cluster)
    with dev_release(cluster, helm_bin, tmp_path, [namespace], request) as rel:
        rel.__class__ = ProxiedRelease
        yield rel


def granted(cluster: LocalCluster, namespace: str) -> set[tuple[str, str]]:
    """(verb, group/resource) pairs of the chart's ClusterRole and Role, as installed."""
    pairs: set[tuple[str, str]] = set()
    for args in (
        ("get", "clusterrole", f"{RELEASE}-controller"),
        ("get", "role", f"{RELEASE}-controller", "-n", namespace),
        # The visibility server's read of the API server's authentication ConfigMap.
        ("get", "role", f"{RELEASE}-auth-reader", "-n", "kube-system"),
    ):
        role = json.loads(cluster.kubectl(*args, "-o", "json").stdout)
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or [""]:
                for res in rule["resources"]:
                    for verb in rule["verbs"]:
                        pairs.add((verb, f"{group}/{res}" if group else res))
    return pairs


@pytest.mark.timeout(300)
async def test_chart_rbac_is_exactly_what_the_controller_uses(
    api: Api, cluster: LocalCluster, release: DevRelease, namespace: str, tmp_path: Path
) -> None:
    assert isinstance(release, ProxiedRelease)
    proxy = FaultProxy(cluster, tmp_path / "proxy")
    (tmp_path / "proxy").mkdir()
    async with running(proxy):
        release.proxy_url = proxy.url
        await asyncio.to_thread(release.install)
        await asyncio.to_thread(release.start)
        scenario = Scenario(api, namespace)
        await scenario.setup()
        await scenario.submit(24, random.Random(5), rate=4.0)
        await wait_until(
            lambda: converged(api, namespace, scenario.jobs),
            within=150, what="every Job Complete as the chart's ServiceAccount",
        )
        await final_checks(api, namespace, scenario.jobs)
        # Raising a running Job's preemption priority: kqueue patches its Workload's spec.
        sticky = job("sticky", namespace, "qa", complete_after="20s")
        await api.apply(sticky)
        await api.wait_workload(
            namespace, "sticky", lambda w: (w.get("status") or {}).get("admission") is not None,
            what="admitted",
        )
        await api.kube.patch(
            JOBS, "sticky",
            {"metadata": {"labels": {c.PREEMPTION_PRIORITY_CLASS_LABEL: scenario.high}}},
            namespace=namespace,
        )
        await api.wait_workload(
            namespace, "sticky", lambda w: w["spec"].get("preemptionPriority") == 1000,
            what="preemption priority raised",
        )
        # Deleting a ClusterQueue: kqueue lifts its resource-in-use finalizer.
        cq = scenario.queues[1].name
        await api.kube.delete(CLUSTER_QUEUES, cq)

        async def cq_gone() -> str | None:
            names = {q["metadata"]["name"] for q in await api.kube.list(CLUSTER_QUEUES)}
            return f"{cq} still there" if cq in names else None

        await wait_until(cq_gone, within=60, what="the ClusterQueue deleted")
        # A graceful restart releases the Lease (update) and the next start acquires it again.
        await asyncio.to_thread(release.stop)
        await asyncio.to_thread(release.start)
        await asyncio.sleep(0)  # let the proxy flush
        webhook_port, metrics_port = release.webhook_port, release.metrics_port
        # Secure metrics (the chart's default): a scraper's token, bound to the chart's
        # metrics-reader ClusterRole; kqueue reviews it (TokenReview, SubjectAccessReview).
        scraper = await asyncio.to_thread(_metrics_scraper_token, cluster, namespace)
        try:
            metrics = await asyncio.to_thread(
                _get, f"https://127.0.0.1:{metrics_port}/metrics", scraper
            )
        finally:
            cluster.kubectl(
                "delete", "clusterrolebinding", f"{namespace}-scraper", "--ignore-not-found",
                check=False,
            )
        plain = await asyncio.to_thread(_plain_http_to_webhook, webhook_port)
        await asyncio.to_thread(release.stop)

    used = set(proxy.calls)
    forbidden = sorted({(v, r, s) for (v, r, s) in proxy.statuses if s == 403})
    assert not forbidden, f"the chart's RBAC is missing permissions: {forbidden}"
    refused = _forbidden_in_log(release.log())
    assert not refused, refused[:5]
    grants = granted(cluster, release.namespace)
    unused = sorted(g for g in grants if g not in used and g not in NOT_REQUESTED)
    assert not unused, f"permissions the chart grants but kqueue never used: {unused}"
    # Non-resource URLs ("/...") and API discovery ("group/" with no resource: kqueue asks
    # whether the cluster serves the gang-scheduling API) are every authenticated user's
    # (system:discovery), not the chart's to grant.
    beyond = sorted(
        u
        for u in used
        if u not in grants and not u[1].startswith("/") and not u[1].endswith("/")
    )
    assert not beyond, f"calls outside the chart's grants: {beyond}"

    # The webhook server speaks TLS only: a plain HTTP request gets no HTTP answer.
    assert plain is None, f"the webhook server answered plain HTTP: {plain}"
    # Metrics: HTTPS for an authorized scraper, kqueue's series, nothing secret.
    assert "kqueue_" in metrics
    # No key material or token in kqueue's log (nor in its metrics).
    token = release.token()
    log = release.log()
    for text, what in ((log, "log"), (metrics, "metrics")):
        assert token not in text, f"the ServiceAccount token appears in kqueue's {what}"
        for pattern in SECRET_PATTERNS:
            assert not pattern.search(text), f"{pattern.pattern} in kqueue's {what}"
    record(
        "rbac",
        {
            "requests": sum(proxy.calls.values()),
            "used_pairs": sorted(f"{v} {r}" for v, r in used),
            "granted_pairs": len(grants),
            "not_requested_by_design": sorted(f"{v} {r}" for v, r in NOT_REQUESTED),
        },
    )


def _forbidden_in_log(log: str) -> list[str]:
    """Lines showing the API server refused kqueue something. The log's timestamp is dropped
    first: its milliseconds (",403") would otherwise read as a 403."""
    stamp = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+\s*")
    return [
        line
        for line in log.splitlines()
        if re.search(r"\b403\b|forbidden", stamp.sub("", line), re.IGNORECASE)
        # A namespace being deleted refusing new content is no permission missing.
        and "because it is being terminated" not in line
    ]


def _get(url: str, token: str) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    # kqueue's self-signed metrics certificate: the scraper skips verification, as the
    # chart's ServiceMonitor does.
    context = ssl._create_unverified_context()
    with urllib.request.urlopen(request, timeout=10, context=context) as resp:
        return str(resp.read().decode())


def _metrics_scraper_token(cluster: LocalCluster, namespace: str) -> str:
    """A ServiceAccount bound to the chart's ``<release>-metrics-reader``: Prometheus' part."""
    cluster.kubectl("create", "serviceaccount", "scraper", "-n", namespace)
    cluster.kubectl(
        "create", "clusterrolebinding", f"{namespace}-scraper",
        f"--clusterrole={RELEASE}-metrics-reader", f"--serviceaccount={namespace}:scraper",
    )
    return cluster.kubectl("create", "token", "scraper", "-n", namespace).stdout.strip()


def _plain_http_to_webhook(port: int) -> Any:
    """POST an AdmissionReview over plain HTTP; the HTTP status if one comes back, else None."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", "/mutate-batch-v1-job", body=b"{}",
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    except (OSError, http.client.HTTPException, ssl.SSLError):
        return None
    finally:
        conn.close()
