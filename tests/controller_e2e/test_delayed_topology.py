"""Delayed topology requests on a real control plane (docs/topology.md): a topology-aware Job
behind a ProvisioningRequest check, on a flavor no node has yet, reserves quota without a
placement, the request is made, and once the provisioner (tests/controller_e2e/provisioner.py)
has created the nodes the Job is placed on them, admitted and bound."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import TopologyAssignment
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission_checks.provisioning.controller import PROVISIONING_REQUESTS
from kqueue.controller.resources import ADMISSION_CHECKS, PROVISIONING_REQUEST_CONFIGS
from kqueue.controller.topology import TOPOLOGIES
from tests.controller_e2e import test_admission_checks as checks_e2e
from tests.controller_e2e.harness import (
    E2E_LABEL,
    Api,
    eventually,
    is_true,
    job,
    local_queue,
    unique,
)
from tests.controller_e2e.provisioner import Provisioner
from tests.controller_e2e.test_admission_checks import (
    check,
    cq_with_checks,
    create,
    prc_ref,
    prov_config,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
# The provisioner that plays cluster-autoscaler, and the ProvisioningRequest CRD it needs.
provisioner = checks_e2e.provisioner
provisioning_requests = checks_e2e.provisioning_requests


async def test_a_topology_job_behind_a_provisioning_request_is_placed_on_the_new_nodes(
    api: Api, namespace: str, provisioner: Provisioner
) -> None:
    topo, rf, cq, pool = unique("hosts"), unique("tas"), unique("cq"), unique("pool")
    prc, ac = unique("prc"), unique("prov")
    await api.kube.create(TOPOLOGIES, {
        "apiVersion": c.API_VERSION, "kind": "Topology",
        "metadata": {"name": topo, "labels": {E2E_LABEL: "true"}},
        "spec": {"levels": [{"nodeLabel": HOST}]},
    })
    api.created.append((TOPOLOGIES, topo, None))
    await create(api, PROVISIONING_REQUEST_CONFIGS, prov_config(prc))
    await create(api, ADMISSION_CHECKS, check(ac, "kqueue.io/provisioning-request", prc_ref(prc)))
    await api.apply({
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor",
        "metadata": {"name": rf, "labels": {E2E_LABEL: "true"}},
        "spec": {"nodeLabels": {"pool": pool}, "topologyName": topo},
    })
    await api.apply(cq_with_checks(cq, [(rf, {"cpu": "8", "memory": "8Gi"})], [{"name": ac}]))
    await api.apply(local_queue("q", namespace, cq))
    spec = job("train", namespace, "q", count=2, cpu="1")
    spec["spec"]["template"]["metadata"]["annotations"][
        c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION
    ] = HOST
    await api.apply(spec)

    # No node of the pool exists: placing at reservation would fail (TopologyPlacementFailed)
    # and the ProvisioningRequest would never be made. The quota is reserved without one.
    reserved = await api.wait_workload(
        namespace, "train", lambda w: is_true(w, c.QUOTA_RESERVED), what="quota reserved"
    )
    (first,) = reserved["status"]["admission"]["podSetAssignments"]
    if not is_true(reserved, c.ADMITTED):
        assert first.get("delayedTopologyRequest") == "Pending", first
        assert "topologyAssignment" not in first, first

    seen: list[Obj] = []

    def admitted(w: Obj) -> bool:
        seen[:] = [w]
        return is_true(w, c.ADMITTED)

    try:
        wl = await api.wait_workload(namespace, "train", admitted, what="Admitted", within=90)
    except BaseException:
        # Say where it stopped: the conditions and the checks.
        status = seen[0].get("status") if seen else None
        print("last seen status:", status)
        raise
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert psa["delayedTopologyRequest"] == "Ready"
    request = f"{wl['metadata']['name']}-{ac}-1"
    assert (await api.kube.get(PROVISIONING_REQUESTS, request, namespace))["metadata"]
    placed = TopologyAssignment.model_validate(psa["topologyAssignment"]).domains()
    hosts = {values[-1] for values, _ in placed}
    assert hosts and hosts <= set(provisioner.nodes), (hosts, provisioner.nodes)

    async def bound() -> set[str] | None:
        nodes = [(p.get("spec") or {}).get("nodeName") for p in await api.pods_of(namespace, "train")]
        named = [n for n in nodes if n]
        return set(named) if len(named) == 2 else None

    got = await eventually(bound, within=90, what="the pods of train bound")
    assert got <= hosts, (got, hosts)
