"""Two-phase admission on a real control plane (docs/admission-checks.md): the
ProvisioningRequest check against a provisioner that plays cluster-autoscaler
(tests/controller_e2e/provisioner.py), and checks owned by an external controller (played by
the test, which marks its AdmissionChecks Active and writes the Workloads' check states)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission_checks.provisioning.controller import PROVISIONING_REQUESTS
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    NODES,
    PROVISIONING_REQUEST_CONFIGS,
    WORKLOADS,
)
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import FakeNode
from tests.controller_e2e.harness import (
    E2E_LABEL,
    Api,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    stays,
    unique,
)
from tests.controller_e2e.provisioner import ATOMIC, CHECK_CAPACITY, Provisioner

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
GPU = "example.com/gpu"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"


@pytest.fixture(scope="module")
def provisioning_requests(cluster: LocalCluster) -> None:
    # Fails (never skips) when the CRD cannot be fetched or served: the message says why.
    cluster.install_provisioning_requests()


@pytest.fixture
async def provisioner(
    api: Api, provisioning_requests: None
) -> AsyncIterator[Provisioner]:
    p = Provisioner(api.kube)
    task = asyncio.create_task(p.run())
    try:
        yield p
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await p.delete_nodes()


async def create(api: Api, resource: Any, obj: Obj) -> Obj:
    out = await api.kube.create(resource, obj)
    api.created.append((resource, obj["metadata"]["name"], None))
    return out


def check(name: str, controller: str, parameters: Obj | None = None) -> Obj:
    spec: Obj = {"controllerName": controller}
    if parameters is not None:
        spec["parameters"] = parameters
    return {"apiVersion": c.API_VERSION, "kind": "AdmissionCheck",
            "metadata": {"name": name, "labels": {E2E_LABEL: "true"}}, "spec": spec}


def prc_ref(name: str) -> Obj:
    return {"apiGroup": "kqueue.io", "kind": "ProvisioningRequestConfig", "name": name}


def prov_config(name: str, klass: str = ATOMIC, **spec: Any) -> Obj:
    return {"apiVersion": c.API_VERSION, "kind": "ProvisioningRequestConfig",
            "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
            "spec": {"provisioningClassName": klass, **spec}}


def gpu_flavor(name: str, pool: str) -> Obj:
    return {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
            "spec": {"nodeLabels": {"pool": pool}}}


def cq_with_checks(name: str, flavors: list[tuple[str, dict[str, str]]], checks: list[Obj]) -> Obj:
    covered = sorted({r for _, quota in flavors for r in quota})
    return {
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": covered, "flavors": [
                {"name": f, "resources": [{"name": r, "nominalQuota": quota.get(r, "0")}
                                          for r in covered]}
                for f, quota in flavors]}],
            "admissionChecksStrategy": {"admissionChecks": checks},
        },
    }


def gpu_job(name: str, namespace: str, queue: str, count: int) -> Obj:
    obj = job(name, namespace, queue, count=count, cpu="1")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][GPU] = "1"
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    return obj


def check_state(wl: Obj, name: str) -> Obj | None:
    for s in (wl.get("status") or {}).get("admissionChecks") or []:
        if s["name"] == name:
            return dict(s)
    return None


async def activate(api: Api, name: str) -> None:
    """The external controller marks its check Active."""
    def change(obj: Obj) -> Obj:
        obj.setdefault("status", {})["conditions"] = [{
            "type": "Active", "status": "True", "reason": "Active", "message": "ready",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        }]
        return obj

    await api.kube.modify_status(ADMISSION_CHECKS, name, change)


async def set_check(api: Api, wl: Obj, name: str, state: str, message: str) -> None:
    """The external controller decides its check for a workload."""
    def change(obj: Obj) -> Obj:
        for s in obj["status"]["admissionChecks"]:
            if s["name"] == name:
                s.update(state=state, message=message,
                         lastTransitionTime="2025-01-01T00:00:00Z")
        return obj

    meta = wl["metadata"]
    await api.kube.modify_status(WORKLOADS, meta["name"], change, namespace=meta["namespace"])


async def gpu_queue(
    api: Api, namespace: str, *, retry: Obj | None = None, klass: str = ATOMIC,
    pool: str | None = None,
) -> tuple[str, str]:
    """A ClusterQueue whose only flavor is a pool (by default one no node has yet), checked by
    a ProvisioningRequest check of class ``klass``; returns (check name, pool)."""
    pool, rf, cq = pool or unique("pool"), unique("gpu"), unique("cq")
    prc, ac = unique("prc"), unique("prov")
    spec = {"retryStrategy": retry} if retry else {}
    await create(api, PROVISIONING_REQUEST_CONFIGS, prov_config(prc, klass, **spec))
    await create(api, ADMISSION_CHECKS, check(ac, "kqueue.io/provisioning-request", prc_ref(prc)))
    await api.apply(gpu_flavor(rf, pool))
    await api.apply(cq_with_checks(cq, [(rf, {"cpu": "8", "memory": "8Gi", GPU: "8"})],
                                   [{"name": ac}]))
    await api.apply(local_queue("q", namespace, cq))
    return ac, pool


async def bound_pods(api: Api, namespace: str, job_name: str, count: int) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods = [p for p in await api.pods_of(namespace, job_name)
                if (p.get("spec") or {}).get("nodeName")]
        return pods if len(pods) == count else None

    return await eventually(probe, within=90, what=f"{count} pods of {job_name} bound")


async def test_provisioned_gpu_job_binds_to_new_nodes(
    api: Api, namespace: str, provisioner: Provisioner
) -> None:
    ac, pool = await gpu_queue(api, namespace)
    await api.apply(gpu_job("train", namespace, "q", 4))
    reserved = await api.wait_workload(
        namespace, "train", lambda w: is_true(w, c.QUOTA_RESERVED), what="quota reserved"
    )
    # Phase one: quota only; the check holds it, the Job stays suspended, no pods.
    admitted = condition(reserved, c.ADMITTED)
    if admitted is not None and admitted["status"] == "False":
        assert admitted["reason"] == "UnsatisfiedAdmissionChecks"
    assert check_state(reserved, ac) is not None
    wl = await api.wait_workload(
        namespace, "train", lambda w: is_true(w, c.ADMITTED), what="Admitted", within=90
    )
    state = check_state(wl, ac)
    assert state is not None and state["state"] == "Ready"
    request = f"{wl['metadata']['name']}-{ac}-1"
    pr = await api.kube.get(PROVISIONING_REQUESTS, request, namespace)
    assert pr["spec"]["podSets"][0]["count"] == 4
    pods = await bound_pods(api, namespace, "train", 4)
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert nodes <= set(provisioner.nodes) and len(nodes) == 4, (nodes, provisioner.nodes)
    for p in pods:
        assert p["metadata"]["annotations"][CONSUME] == request
        assert p["spec"]["nodeSelector"]["pool"] == pool


async def test_check_capacity_answers_from_the_nodes_that_exist(
    api: Api, namespace: str, provisioner: Provisioner
) -> None:
    pool = unique("pool")
    existing = []
    for i in range(2):
        node = FakeNode(name=f"{pool}-{i}", labels={"pool": pool},
                        allocatable={"cpu": "4", "memory": "16Gi", "pods": "110", GPU: "1"})
        await api.kube.create(NODES, node.manifest())
        provisioner.nodes.append(node.name)  # deleted with the provisioner's
        existing.append(node.name)
    ac, _ = await gpu_queue(api, namespace, klass=CHECK_CAPACITY, pool=pool)
    await api.apply(gpu_job("fits", namespace, "q", 2))
    wl = await api.wait_workload(
        namespace, "fits", lambda w: is_true(w, c.ADMITTED), what="Admitted", within=90
    )
    pods = await bound_pods(api, namespace, "fits", 2)
    assert sorted(p["spec"]["nodeName"] for p in pods) == existing
    assert provisioner.answered == [f"{wl['metadata']['name']}-{ac}-1:Provisioned"]
    # The quota has room for one more GPU pod, the nodes do not: check-capacity never scales
    # up, so the check stays Pending with the autoscaler's message and nothing is released.
    await api.apply(gpu_job("no-room", namespace, "q", 1))

    def told(w: Obj) -> bool:
        state = check_state(w, ac)
        return state is not None and state.get("message") == "not enough capacity"

    held = await api.wait_workload(namespace, "no-room", told, what="check-capacity's answer")
    assert is_true(held, c.QUOTA_RESERVED) and not is_true(held, c.ADMITTED)
    assert check_state(held, ac)["state"] == "Pending"  # type: ignore[index]
    assert (await api.job(namespace, "no-room"))["spec"]["suspend"] is True
    assert len(provisioner.nodes) == 2  # no node was added


async def test_failed_request_is_retried_with_backoff_and_provisioned_on_second_attempt(
    api: Api, namespace: str, provisioner: Provisioner
) -> None:
    ac, _ = await gpu_queue(
        api, namespace, retry={"backoffLimitCount": 2, "backoffBaseSeconds": 2,
                               "backoffMaxSeconds": 10},
    )
    # This check's first attempt only: an earlier test's request still pending in its
    # namespace (being deleted) must not take the failure.
    provisioner.fail.add(f"-{ac}-1")
    await api.apply(gpu_job("retry", namespace, "q", 2))
    wl = await api.wait_workload(
        namespace, "retry", lambda w: is_true(w, c.ADMITTED), what="Admitted", within=120
    )
    state = check_state(wl, ac)
    assert state is not None and state["state"] == "Ready"
    assert state.get("retryCount") == 1
    name = wl["metadata"]["name"]
    assert provisioner.answered[:1] == [f"{name}-{ac}-1:Failed"]
    assert f"{name}-{ac}-2:Provisioned" in provisioner.answered
    evicted = condition(wl, c.EVICTED)
    assert evicted is not None and evicted["status"] == "False"
    assert "AdmissionCheck in Retry state" in evicted["message"]
    # The first attempt's request was cleaned up on eviction.
    with pytest.raises(KubeError):
        await api.kube.get(PROVISIONING_REQUESTS, f"{name}-{ac}-1", namespace)
    await bound_pods(api, namespace, "retry", 2)


async def test_capacity_revoked_after_admission_evicts_and_requeues(
    api: Api, namespace: str, provisioner: Provisioner
) -> None:
    ac, _ = await gpu_queue(
        api, namespace, retry={"backoffLimitCount": 2, "backoffBaseSeconds": 1,
                               "backoffMaxSeconds": 5},
    )
    await api.apply(gpu_job("revoked", namespace, "q", 2))
    wl = await api.wait_workload(
        namespace, "revoked", lambda w: is_true(w, c.ADMITTED), what="Admitted", within=90
    )
    await bound_pods(api, namespace, "revoked", 2)
    name = wl["metadata"]["name"]
    await provisioner.revoke(namespace, f"{name}-{ac}-1")

    def readmitted(w: Obj) -> bool:
        state = check_state(w, ac)
        return is_true(w, c.ADMITTED) and state is not None and state.get("retryCount") == 1

    wl = await api.wait_workload(namespace, "revoked", readmitted, what="evicted, requeued and "
                                 "admitted on a second attempt", within=120)
    requeued = condition(wl, c.REQUEUED)
    assert requeued is not None and requeued["reason"] == "AdmissionCheck"
    assert f"{name}-{ac}-2:Provisioned" in provisioner.answered


async def test_rejected_by_external_check_deactivates_with_message(
    api: Api, namespace: str
) -> None:
    ac, rf, cq = unique("ext"), unique("od"), unique("cq")
    await create(api, ADMISSION_CHECKS, check(ac, "example.com/budget"))
    await activate(api, ac)
    await api.apply(flavor(rf, "on-demand"))
    await api.apply(cq_with_checks(cq, [(rf, {"cpu": "8", "memory": "8Gi"})], [{"name": ac}]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("denied", namespace, "q", count=2))
    wl = await api.wait_workload(
        namespace, "denied", lambda w: check_state(w, ac) is not None, what="check listed"
    )
    assert not is_true(wl, c.ADMITTED)
    assert (await api.job(namespace, "denied"))["spec"]["suspend"] is True
    await set_check(api, wl, ac, "Rejected", "over budget")
    wl = await api.wait_workload(
        namespace, "denied", lambda w: w["spec"].get("active") is False, what="deactivated"
    )
    target = condition(wl, c.DEACTIVATION_TARGET)
    assert target is not None
    assert target["message"] == f'AdmissionCheck in Rejected state: "{ac}" (over budget)'
    wl = await api.wait_workload(
        namespace, "denied", lambda w: not is_true(w, c.QUOTA_RESERVED), what="quota released"
    )
    evicted = condition(wl, c.EVICTED)
    assert evicted is not None and evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert (await api.job(namespace, "denied"))["spec"]["suspend"] is True
    assert await api.pods_of(namespace, "denied") == []


async def test_per_flavor_strategy_checks_only_the_spot_flavor(api: Api, namespace: str) -> None:
    ac, spot, reserved, cq = unique("spotcheck"), unique("spot"), unique("res"), unique("cq")
    await create(api, ADMISSION_CHECKS, check(ac, "example.com/spot-capacity"))
    await activate(api, ac)
    await api.apply(flavor(spot, "spot", spot=True))
    await api.apply(flavor(reserved, "on-demand"))
    await api.apply(cq_with_checks(
        cq, [(spot, {"cpu": "2", "memory": "8Gi"}), (reserved, {"cpu": "8", "memory": "8Gi"})],
        [{"name": ac, "onFlavors": [spot]}],
    ))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("on-spot", namespace, "q", count=2))
    on_spot = await api.wait_workload(
        namespace, "on-spot", lambda w: is_true(w, c.QUOTA_RESERVED), what="reserved"
    )
    flavors = on_spot["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert flavors["cpu"] == spot
    assert check_state(on_spot, ac) is not None and not is_true(on_spot, c.ADMITTED)
    await api.apply(job("on-reserved", namespace, "q", count=2))
    on_reserved = await api.wait_workload(
        namespace, "on-reserved", lambda w: is_true(w, c.ADMITTED), what="Admitted"
    )
    assert on_reserved["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == reserved
    assert check_state(on_reserved, ac) is None
    await set_check(api, on_spot, ac, "Ready", "spot capacity found")
    await api.wait_workload(namespace, "on-spot", lambda w: is_true(w, c.ADMITTED),
                            what="Admitted once its check is Ready")


async def test_bad_checks_make_the_cluster_queue_inactive_and_keep_what_runs(
    api: Api, namespace: str
) -> None:
    rf, cq = unique("od"), unique("cq")
    unknown, missing = unique("unknown"), unique("noconfig")
    await api.apply(flavor(rf, "on-demand"))
    plain = cq_with_checks(cq, [(rf, {"cpu": "8", "memory": "8Gi"})], [])
    del plain["spec"]["admissionChecksStrategy"]  # no checks yet (the list needs one entry)
    await api.apply(plain)
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("running", namespace, "q", count=1))
    await api.wait_workload(namespace, "running", lambda w: is_true(w, c.ADMITTED), what="admitted")

    await create(api, ADMISSION_CHECKS, check(unknown, "example.com/nobody"))
    await create(api, ADMISSION_CHECKS,
                 check(missing, "kqueue.io/provisioning-request", prc_ref("does-not-exist")))

    async def inactive_check() -> Obj | None:
        ac = await api.kube.get(ADMISSION_CHECKS, missing)
        cond = condition(ac, "Active")
        return cond if cond is not None and cond["status"] == "False" else None

    cond = await eventually(inactive_check, what=f"AdmissionCheck {missing} Active=False")
    assert cond["reason"] == "ProvisioningRequestConfigNotFound"
    assert "does-not-exist" in cond["message"]

    cq_obj = await api.kube.get(CLUSTER_QUEUES, cq)
    cq_obj["spec"]["admissionChecksStrategy"] = {
        "admissionChecks": [{"name": unknown}, {"name": missing}, {"name": "never-created"}]
    }
    await api.kube.replace(CLUSTER_QUEUES, cq_obj)

    async def cq_inactive() -> Obj | None:
        obj = await api.kube.get(CLUSTER_QUEUES, cq)
        active = condition(obj, "Active")
        return active if active is not None and active["status"] == "False" else None

    active = await eventually(cq_inactive, what=f"ClusterQueue {cq} Active=False")
    assert active["reason"] == "AdmissionCheckNotFound"
    assert active["message"] == (
        "Can't admit new workloads: references missing AdmissionCheck(s): never-created"
    )
    await api.apply(job("blocked", namespace, "q", count=1))

    async def still() -> bool:
        running = await api.workload_of(namespace, "running")
        blocked = await api.workload_of(namespace, "blocked")
        return (running is not None and is_true(running, c.ADMITTED)
                and not is_true(running, c.EVICTED)
                and (blocked is None or not is_true(blocked, c.QUOTA_RESERVED)))

    await stays(still, for_s=5, what="the admitted Job kept, the new one not admitted")
    blocked = await api.workload_of(namespace, "blocked")
    assert blocked is not None
    pending = condition(blocked, c.QUOTA_RESERVED)
    assert pending is not None and "inactive" in pending["message"]
