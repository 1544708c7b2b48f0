"""The shared fake API server behaves as the controller relies on the real one to."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kqueue.controller.informer import as_dict
from kqueue.controller.kube import JSON_PATCH, Conflict, Kube, KubeError, NotFound
from kqueue.controller.resources import CONFIGMAPS, WORKLOADS
from tests.controller.fake_apiserver import (
    FakeApiServer,
    FakeCluster,
    Refused,
    eventually,
    start_app,
)


def cm(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "data": {"k": "v"}}


async def test_a_stale_write_conflicts_and_a_fresh_one_lands(cluster: FakeCluster) -> None:
    created = await cluster.kube.create(CONFIGMAPS, cm("a"), "ns")
    fresh = await cluster.kube.replace(CONFIGMAPS, {**created, "data": {"k": "1"}}, namespace="ns")
    with pytest.raises(Conflict):
        await cluster.kube.replace(CONFIGMAPS, {**created, "data": {"k": "2"}}, namespace="ns")
    with pytest.raises(Conflict):
        await cluster.kube.create(CONFIGMAPS, cm("a"), "ns")
    assert fresh["metadata"]["uid"] == created["metadata"]["uid"]
    assert cluster.server.get(CONFIGMAPS, "a", "ns")["data"] == {"k": "1"}  # type: ignore[index]


async def test_status_and_the_object_are_written_apart(cluster: FakeCluster) -> None:
    wl = cluster.server.add(
        WORKLOADS,
        {"metadata": {"name": "w", "namespace": "ns"}, "spec": {"queueName": "a"}, "status": {}},
    )
    await cluster.kube.replace_status(
        WORKLOADS, {**wl, "spec": {"queueName": "ignored"}, "status": {"x": 1}}, namespace="ns"
    )
    await cluster.kube.patch(WORKLOADS, "w", {"spec": {"queueName": "b"}, "status": {"x": 2}},
                             namespace="ns")
    stored = cluster.server.get(WORKLOADS, "w", "ns")
    assert stored is not None and stored["spec"] == {"queueName": "b"} and stored["status"] == {"x": 1}


async def test_a_json_patch_test_op_is_a_precondition(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, cm("a"))
    ops = [{"op": "test", "path": "/data/k", "value": "other"},
           {"op": "replace", "path": "/data/k", "value": "x"}]
    with pytest.raises(KubeError) as err:
        await cluster.kube.patch(CONFIGMAPS, "a", ops, namespace="ns", content_type=JSON_PATCH)
    assert err.value.status == 422
    with pytest.raises(NotFound):
        await cluster.kube.get(CONFIGMAPS, "b", "ns")


async def test_informers_follow_the_server_and_its_selectors(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, cm("a", team="x"))
    everything = await cluster.informer(CONFIGMAPS, as_dict)
    team = await cluster.informer(CONFIGMAPS, as_dict, label_selector="team=x")
    assert list(team.store) == ["ns/a"]
    await cluster.kube.create(CONFIGMAPS, cm("b", team="x"), "ns")
    await cluster.kube.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"team": "y"}}}, namespace="ns")
    await cluster.synced()
    assert list(team.store) == ["ns/b"]  # a left the selector: deleted from that view
    assert list(everything.store) == ["ns/a", "ns/b"]


async def test_finalizers_hold_a_deleted_object_until_the_last_goes(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, {**cm("a"), "metadata": {**cm("a")["metadata"], "finalizers": ["f"]}})  # type: ignore[dict-item]
    await cluster.kube.delete(CONFIGMAPS, "a", namespace="ns")
    held = cluster.server.get(CONFIGMAPS, "a", "ns")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    await cluster.kube.patch(CONFIGMAPS, "a", {"metadata": {"finalizers": None}}, namespace="ns")
    assert cluster.server.get(CONFIGMAPS, "a", "ns") is None


async def test_faults_and_overlap_are_observable(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, cm("a"))
    cluster.server.fail("PATCH", CONFIGMAPS, "a", code=503, times=1)
    with pytest.raises(KubeError) as err:
        await cluster.kube.patch(CONFIGMAPS, "a", {"data": {"k": "1"}}, namespace="ns")
    assert err.value.status == 503
    await cluster.kube.patch(CONFIGMAPS, "a", {"data": {"k": "1"}}, namespace="ns")
    assert [r.name for r in cluster.server.requests_to("PATCH", CONFIGMAPS)] == ["a", "a"]


async def test_discovery_admission_and_the_record_of_writes(cluster: FakeCluster) -> None:
    assert (await cluster.kube.request("GET", "/api/v1"))[0] == 404  # not declared served
    cluster.server.discovery["v1"] = ["configmaps"]
    status, body = await cluster.kube.request("GET", "/api/v1")
    assert status == 200 and [r["name"] for r in body["resources"]] == ["configmaps"]

    def admit(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["data"].get("k") == "refused":
            raise Refused(422, "Invalid", "data.k: Forbidden")
        obj["data"]["defaulted"] = "yes"
        return obj

    cluster.server.admission[CONFIGMAPS.plural] = admit
    created = await cluster.kube.create(CONFIGMAPS, cm("a"), "ns")
    assert created["data"] == {"k": "v", "defaulted": "yes"}
    with pytest.raises(KubeError, match=r"data\.k: Forbidden") as err:
        await cluster.kube.create(CONFIGMAPS, {**cm("b"), "data": {"k": "refused"}}, "ns")
    assert err.value.status == 422
    await cluster.kube.replace(CONFIGMAPS, created, namespace="ns")
    assert cluster.server.writes == [
        ("create", "/api/v1/namespaces/ns/configmaps/a"),
        ("replace", "/api/v1/namespaces/ns/configmaps/a"),
    ]


async def test_a_partitioned_client_gets_503_and_is_not_recorded() -> None:
    server = FakeApiServer(partitioned={"cut-off"})
    test_server, (cut, ok) = await start_app(server.app(), ["cut-off", "kqueue"])
    try:
        assert (await Kube(cut).request("GET", CONFIGMAPS.collection_path("ns")))[0] == 503
        assert (await Kube(ok).request("GET", CONFIGMAPS.collection_path("ns")))[0] == 200
        assert len(server.requests) == 1
    finally:
        for client in (cut, ok):
            await client.close()
        await test_server.close()


async def test_held_requests_wait_for_their_release(cluster: FakeCluster) -> None:
    for name in ("a", "b"):
        cluster.server.add(CONFIGMAPS, cm(name))
    cluster.server.hold("PATCH", CONFIGMAPS, "a")
    held = asyncio.ensure_future(
        cluster.kube.patch(CONFIGMAPS, "a", {"data": {"k": "1"}}, namespace="ns")
    )
    await eventually(lambda: cluster.server.in_flight("PATCH", CONFIGMAPS, "a", "ns") == 1)
    await cluster.kube.patch(CONFIGMAPS, "b", {"data": {"k": "1"}}, namespace="ns")  # not held
    assert cluster.server.in_flight("PATCH", CONFIGMAPS, "b", "ns") == 0
    assert cluster.server.get(CONFIGMAPS, "a", "ns")["data"] == {"k": "v"}  # type: ignore[index]
    cluster.server.release()
    await held
    assert cluster.server.get(CONFIGMAPS, "a", "ns")["data"] == {"k": "1"}  # type: ignore[index]
    # b's patch overlapped a's: two at once on the resource, one at a time per object.
    assert cluster.server.max_in_flight("PATCH", CONFIGMAPS) == 2
    assert cluster.server.max_in_flight("PATCH", CONFIGMAPS, "a", "ns") == 1
    assert cluster.server.max_in_flight("PATCH", CONFIGMAPS, "b", "ns") == 1


async def test_a_held_request_whose_client_gave_up_is_not_carried_out(
    cluster: FakeCluster,
) -> None:
    cluster.server.add(CONFIGMAPS, cm("a"))
    cluster.server.hold("PATCH", CONFIGMAPS)
    given_up = asyncio.ensure_future(
        cluster.kube.patch(CONFIGMAPS, "a", {"data": {"k": "1"}}, namespace="ns")
    )
    await eventually(lambda: cluster.server.in_flight("PATCH", CONFIGMAPS, "a", "ns") == 1)
    given_up.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given_up
    cluster.server.release()
    await eventually(lambda: cluster.server.in_flight("PATCH", CONFIGMAPS) == 0)
    assert cluster.server.get(CONFIGMAPS, "a", "ns")["data"] == {"k": "v"}  # type: ignore[index]
    assert cluster.server.writes == []


async def test_a_fault_can_pick_the_writes_it_fails_by_their_body(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, cm("a"))
    cluster.server.fail("PATCH", CONFIGMAPS, when=lambda body: body["data"]["k"] == "bad")
    with pytest.raises(KubeError) as err:
        await cluster.kube.patch(CONFIGMAPS, "a", {"data": {"k": "bad"}}, namespace="ns")
    assert err.value.status == 500
    await cluster.kube.patch(CONFIGMAPS, "a", {"data": {"k": "good"}}, namespace="ns")
    assert cluster.server.get(CONFIGMAPS, "a", "ns")["data"] == {"k": "good"}  # type: ignore[index]
