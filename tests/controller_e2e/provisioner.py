"""A small provisioner that plays cluster-autoscaler's part for ProvisioningRequests
(docs/local-cluster.md): for ``best-effort-atomic-scale-up`` it creates the kwok nodes the
request needs (one per pod, labelled with the pod template's nodeSelector and sized to its
requests), then sets ``Provisioned``; for ``check-capacity`` it answers from the nodes that
exist (their allocatable less what the pods bound there request; it never adds a node). Tests
can make an attempt fail (``fail``) or revoke capacity (``revoke``)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kqueue.api.quantity import Quantity, parse_quantity
from kqueue.controller.admission_checks.provisioning.controller import (
    POD_TEMPLATES,
    PROVISIONING_REQUESTS,
)
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.resources import NODES, PODS
from kqueue.localcluster.nodes import FakeNode

Obj = dict[str, Any]
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
NODE_LABEL = "provisioner.kqueue.io/request"


def _condition(type_: str, status: str, reason: str, message: str) -> Obj:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now}


def _has(pr: Obj, type_: str, status: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == status
        for c in (pr.get("status") or {}).get("conditions") or []
    )


def _answered(pr: Obj) -> bool:
    return _has(pr, "Provisioned", "True") or _has(pr, "Failed", "True")


@dataclass
class Provisioner:
    kube: Kube
    # Request names (or name suffixes) to answer with Failed instead.
    fail: set[str] = field(default_factory=set)
    nodes: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            with contextlib.suppress(KubeError):
                for pr in await self.kube.list(PROVISIONING_REQUESTS):
                    if not _answered(pr):
                        await self._answer(pr)
            await asyncio.sleep(0.3)

    async def _set(self, pr: Obj, *conditions: Obj) -> None:
        pr = dict(pr)
        status = dict(pr.get("status") or {})
        kept = [c for c in status.get("conditions") or []
                if c["type"] not in {x["type"] for x in conditions}]
        status["conditions"] = kept + list(conditions)
        pr["status"] = status
        meta = pr["metadata"]
        await self.kube.replace_status(PROVISIONING_REQUESTS, pr, namespace=meta["namespace"])

    async def _templates(self, pr: Obj) -> list[tuple[Obj, int]]:
        ns = pr["metadata"]["namespace"]
        out = []
        for ps in pr["spec"]["podSets"]:
            pt = await self.kube.get(POD_TEMPLATES, ps["podTemplateRef"]["name"], ns)
            out.append((pt["template"], int(ps["count"])))
        return out

    async def _answer(self, pr: Obj) -> None:
        name = pr["metadata"]["name"]
        if any(name == f or name.endswith(f) for f in self.fail):
            self.fail = {f for f in self.fail if not (name == f or name.endswith(f))}
            await self._set(pr, _condition("Failed", "True", "OutOfStock", "no capacity left"))
            self.answered.append(f"{name}:Failed")
            return
        klass = pr["spec"]["provisioningClassName"]
        templates = await self._templates(pr)
        if klass == CHECK_CAPACITY:
            fits = await self._fits_existing(templates)
            if fits:
                await self._set(pr, _condition("Provisioned", "True", "CapacityIsFound", "fits"))
                self.answered.append(f"{name}:Provisioned")
            elif not _has(pr, "Provisioned", "False"):
                # Asked again on every round (capacity may free up); written once.
                await self._set(pr, _condition("Provisioned", "False", "CapacityIsNotFound",
                                               "not enough capacity"))
            return
        created = 0
        for i, (template, count) in enumerate(templates):
            spec = template.get("spec") or {}
            for n in range(count):
                node = FakeNode(
                    name=f"prov-{name}-{i}-{n}"[:63],
                    labels={**(spec.get("nodeSelector") or {}), NODE_LABEL: name[:63]},
                    allocatable={**_requests(spec), "memory": "16Gi", "pods": "110"},
                )
                with contextlib.suppress(KubeError):
                    await self.kube.create(NODES, node.manifest())
                    created += 1
                self.nodes.append(node.name)
        await self._set(
            pr, _condition("Accepted", "True", "Accepted", "accepted"),
            _condition("Provisioned", "True", "Provisioned", f"{created} nodes created"),
        )
        self.answered.append(f"{name}:Provisioned")

    async def _fits_existing(self, templates: list[tuple[Obj, int]]) -> bool:
        """Whether the pods fit on the nodes that exist now (cluster-autoscaler's
        check-capacity simulation, without scheduling constraints beyond nodeSelector)."""
        nodes = await self.kube.list(NODES)
        used: dict[str, dict[str, int]] = {}
        for pod in await self.kube.list(PODS):
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                on = used.setdefault(node_name, {})
                for k, v in _requests(pod.get("spec") or {}).items():
                    on[k] = on.get(k, 0) + parse_quantity(v, k)
        for template, count in templates:
            spec = template.get("spec") or {}
            selector = spec.get("nodeSelector") or {}
            need = {k: parse_quantity(v, k) for k, v in _requests(spec).items()}
            room = 0
            for node in nodes:
                labels = node["metadata"].get("labels") or {}
                if any(labels.get(k) != v for k, v in selector.items()):
                    continue
                alloc = (node.get("status") or {}).get("allocatable") or {}
                taken = used.get(node["metadata"]["name"], {})
                per = [
                    (parse_quantity(alloc.get(k, "0"), k) - taken.get(k, 0)) // v
                    for k, v in need.items() if v
                ]
                room += max(min(per), 0) if per else 0
            if room < count:
                return False
        return True

    async def revoke(self, namespace: str, name: str) -> None:
        pr = await self.kube.get(PROVISIONING_REQUESTS, name, namespace)
        await self._set(pr, _condition("CapacityRevoked", "True", "CapacityRevoked",
                                       "the nodes were reclaimed"))

    async def delete_nodes(self) -> None:
        for node in self.nodes:
            await self.kube.delete(NODES, node)


def _requests(spec: Obj) -> dict[str, str]:
    out: dict[str, int] = {}
    for ct in spec.get("containers") or []:
        for k, v in ((ct.get("resources") or {}).get("requests") or {}).items():
            out[k] = out.get(k, 0) + parse_quantity(v, k)
    return {k: str(Quantity.from_units(v, k)) for k, v in out.items()}
