"""The local control plane is the real thing: versions, nodes, RBAC and the kubectl CLI."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.localcluster.build import KUBERNETES_VERSION
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import DEFAULT_NODES, GPU_RESOURCE

pytestmark = pytest.mark.cluster


def test_kubectl_reports_the_built_version(cluster: LocalCluster) -> None:
    res = cluster.kubectl("version", "-o", "json")
    versions = json.loads(res.stdout)
    assert versions["clientVersion"]["gitVersion"] == KUBERNETES_VERSION
    assert versions["serverVersion"]["gitVersion"] == KUBERNETES_VERSION
    assert versions["serverVersion"]["gitTreeState"] == "clean"


def test_kubectl_get_nodes_lists_the_kwok_nodes(cluster: LocalCluster) -> None:
    res = cluster.kubectl("get", "nodes", "-o", "json")
    nodes = {n["metadata"]["name"]: n for n in json.loads(res.stdout)["items"]}
    assert set(nodes) == {n.name for n in DEFAULT_NODES}
    for want in DEFAULT_NODES:
        got = nodes[want.name]
        for key, value in want.labels.items():
            assert got["metadata"]["labels"][key] == value
        taints = [(t["key"], t.get("value"), t["effect"]) for t in got["spec"].get("taints", [])]
        assert taints == [(t["key"], t["value"], t["effect"]) for t in want.taints]
        ready = [c for c in got["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", got["status"]["conditions"]
    gpu = [n for n in nodes.values() if GPU_RESOURCE in n["status"]["allocatable"]]
    assert gpu and all(n["status"]["allocatable"][GPU_RESOURCE] == "8" for n in gpu)
    # the human-readable table too, as a user would see it
    table = cluster.kubectl("get", "nodes").stdout
    for want in DEFAULT_NODES:
        assert want.name in table


async def test_rbac_is_enforced(api_client: client.ApiClient, namespace: str) -> None:
    """A service account without bindings is denied: authorization really runs."""
    core = client.CoreV1Api(api_client)
    authz = client.AuthorizationV1Api(api_client)
    review = await authz.create_subject_access_review(
        client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=f"system:serviceaccount:{namespace}:default",
                resource_attributes=client.V1ResourceAttributes(
                    namespace=namespace, verb="create", resource="pods"
                ),
            )
        )
    )
    assert review.status.allowed is False
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod(
            namespace,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name="bad"),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
            ),
            _request_timeout=10,
            dry_run="All",
            field_validation="Strict",
            # an impersonation header makes the request as the unprivileged account
            _headers={"Impersonate-User": f"system:serviceaccount:{namespace}:default"},
        )
    assert err.value.status == 403
