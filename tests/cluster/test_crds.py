"""kqueue's CRDs (api/*.yaml) install into a real API server, which then validates and defaults
kqueue objects by their schemas."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.localcluster.cluster import LocalCluster

pytestmark = pytest.mark.cluster

API_DIR = Path(__file__).resolve().parents[2] / "api"
GROUP, VERSION = "kqueue.io", "v1alpha1"
KINDS = {
    "ResourceFlavor": "Cluster",
    "ClusterQueue": "Cluster",
    "Cohort": "Cluster",
    "WorkloadPriorityClass": "Cluster",
    "Topology": "Cluster",
    "AdmissionCheck": "Cluster",
    "ProvisioningRequestConfig": "Cluster",
    "MultiKueueConfig": "Cluster",
    "MultiKueueCluster": "Cluster",
    "LocalQueue": "Namespaced",
    "Workload": "Namespaced",
}


def crd_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(API_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return docs


@pytest.fixture(scope="module")
def installed_crds(cluster: LocalCluster) -> list[dict[str, Any]]:
    docs = crd_documents()
    if not docs:
        pytest.fail(f"no CustomResourceDefinition found in {API_DIR}/*.yaml")
    # Server-side apply: CRD schemas are too large for the last-applied annotation of a
    # client-side apply.
    manifest = yaml.safe_dump_all(docs)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=manifest)
    names = [f"crd/{d['metadata']['name']}" for d in docs]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    return docs


def test_every_kqueue_kind_is_served(cluster: LocalCluster, installed_crds: Any) -> None:
    res = cluster.kubectl("api-resources", f"--api-group={GROUP}", "-o", "wide", "--no-headers")
    served = {}
    for line in res.stdout.splitlines():
        cols = line.split()
        # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS CATEGORIES
        kind_index = next(i for i, c in enumerate(cols) if c in KINDS)
        served[cols[kind_index]] = cols
    assert set(served) == set(KINDS), res.stdout
    for kind, scope in KINDS.items():
        cols = served[kind]
        assert cols[cols.index(kind) - 1] == ("true" if scope == "Namespaced" else "false")
        assert "kqueue" in cols[-1].split(","), f"{kind} lacks the kqueue category: {cols}"
    # the category works from the command line
    cluster.kubectl("get", "kqueue", "-A")


async def _create(api_client: client.ApiClient, plural: str, body: dict[str, Any]) -> Any:
    return await client.CustomObjectsApi(api_client).create_cluster_custom_object(
        GROUP, VERSION, plural, body
    )


def _cluster_queue(name: str, nominal_quota: Any, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "on-demand",
                            "resources": [{"name": "cpu", "nominalQuota": nominal_quota}],
                        }
                    ],
                }
            ],
            **spec,
        },
    }


async def test_valid_objects_are_accepted_and_defaulted(
    api_client: client.ApiClient, installed_crds: Any
) -> None:
    api = client.CustomObjectsApi(api_client)
    suffix = uuid.uuid4().hex[:6]
    rf = f"rf-{suffix}"
    cq = f"cq-{suffix}"
    try:
        await _create(
            api_client,
            "resourceflavors",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ResourceFlavor",
                "metadata": {"name": rf},
                "spec": {"nodeLabels": {"instance-type": "on-demand"}},
            },
        )
        created = await _create(api_client, "clusterqueues", _cluster_queue(cq, "4"))
        # Defaults are Kueue's and come from the schema, applied by the API server.
        assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"
        assert created["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0][
            "nominalQuota"
        ] in ("4", 4)
    finally:
        for plural, name in (("clusterqueues", cq), ("resourceflavors", rf)):
            try:
                await api.delete_cluster_custom_object(GROUP, VERSION, plural, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.mark.parametrize(
    ("plural", "body", "field_path"),
    [
        pytest.param(
            "clusterqueues",
            _cluster_queue("bad-quota-type", {"amount": 4}),
            "nominalQuota",
            id="nominalQuota-object",
        ),
        pytest.param(
            "clusterqueues",
            _cluster_queue("bad-quota-string", "4 cores"),
            "nominalQuota",
            id="nominalQuota-not-a-quantity",
        ),
        pytest.param(
            "clusterqueues",
            {**_cluster_queue("bad-groups", "1"), "spec": {"resourceGroups": "cpu"}},
            "spec.resourceGroups",
            id="resourceGroups-not-a-list",
        ),
        pytest.param(
            "clusterqueues",
            _cluster_queue("bad-strategy", "1", queueingStrategy="Random"),
            "spec.queueingStrategy",
            id="queueingStrategy-not-in-enum",
        ),
        pytest.param(
            "resourceflavors",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ResourceFlavor",
                "metadata": {"name": "bad-labels"},
                "spec": {"nodeLabels": {"instance-type": ["spot"]}},
            },
            "spec.nodeLabels",
            id="nodeLabels-value-not-a-string",
        ),
    ],
)
async def test_invalid_objects_are_rejected_by_the_schema(
    api_client: client.ApiClient,
    installed_crds: Any,
    plural: str,
    body: dict[str, Any],
    field_path: str,
) -> None:
    with pytest.raises(ApiException) as err:
        await _create(api_client, plural, body)
    assert err.value.status == 422, err.value.body
    assert field_path in err.value.body, err.value.body
