"""``kqueue explain NS/NAME``: why a workload is pending, or why it has the flavors it has.

The objects come from a live cluster (``--kubeconfig``, the in-cluster service account, or the
default kubeconfig) or from manifests (``--file``); the same Engine as the controller's then looks
at the workload (``kqueue.engine.sim.explain``). This module only fetches and formats.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import Any

import click
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient

from kqueue.api.loader import LoadedObject, LoadError, Location, load_object
from kqueue.api.quantity import format_quantity
from kqueue.cli.manifests import InvalidInput, read_manifests
from kqueue.engine.explain import PendingDetails
from kqueue.engine.sim.explain import Explanation, explain
from kqueue.engine.sim.scenario import Scenario, build_scenario
from kqueue.engine.sim.setup import default_preemptor
from kqueue.engine.types import Mode
from kqueue.engine.victim import VictimSearch

EXIT_NOT_FOUND = 1


# --- fetching -----------------------------------------------------------------------------------


async def _fetch(kubeconfig: str | None) -> list[dict[str, Any]]:
    from kqueue.controller import kube as k
    from kqueue.controller import resources as r
    from kqueue.controller.resources import NAMESPACES, PRIORITY_CLASSES, Resource

    if kubeconfig:
        api = await kube_config.new_client_from_config(config_file=kubeconfig)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = ApiClient()
    else:
        api = await kube_config.new_client_from_config()
    client = k.Kube(api)
    kinds: list[tuple[Resource, str]] = [
        (NAMESPACES, "Namespace"),
        (PRIORITY_CLASSES, "PriorityClass"),
        (r.RESOURCE_FLAVORS, "ResourceFlavor"),
        (r.COHORTS, "Cohort"),
        (r.CLUSTER_QUEUES, "ClusterQueue"),
        (r.LOCAL_QUEUES, "LocalQueue"),
        (r.WORKLOAD_PRIORITY_CLASSES, "WorkloadPriorityClass"),
        (r.WORKLOADS, "Workload"),
    ]
    docs: list[dict[str, Any]] = []
    try:
        for resource, kind in kinds:
            try:
                items = await _list(client, resource)
            except k.NotFound:
                continue  # that kind is not installed: nothing of it to take into account
            for item in items:
                # List items from the API server do not always repeat their kind.
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", kind)
                docs.append(item)
    except k.KubeError as err:
        raise click.ClickException(f"cannot read the cluster: {err}") from err
    finally:
        await api.close()
    return docs


# Statuses worth another try: an API server that is starting or overloaded (429 "storage is
# (re)initializing" right after a CRD is established, 503 while it is not ready).
_TRANSIENT = frozenset({429, 500, 503, 504})


async def _list(client: Any, resource: Any) -> list[dict[str, Any]]:
    from kqueue.controller import kube as k

    delay = 0.2
    for attempt in range(8):
        try:
            items: list[dict[str, Any]] = await client.list(resource)
            return items
        except k.KubeError as err:
            if err.status not in _TRANSIENT or attempt == 7:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 3.0)
    raise AssertionError("unreachable")


def _cluster_objects(kubeconfig: str | None) -> list[LoadedObject]:
    docs = asyncio.run(_fetch(kubeconfig))
    out = []
    for index, doc in enumerate(docs, start=1):
        try:
            obj = load_object(doc, Location("<cluster>", index))
        except LoadError as err:
            click.echo(f"warning: skipped: {err}", err=True)
            continue
        if obj is not None:
            out.append(obj)
    return out


def _find(scenario: Scenario, key: str) -> str | None:
    """``key`` as a Workload, or the Workload of a Job, Pod or pod group of that name."""
    keys = {sw.key for sw in scenario.workloads}
    if key in keys:
        return key
    ns, _, name = key.partition("/")
    for sw in scenario.workloads:
        if (sw.api.namespace or "default") != ns:
            continue
        if sw.source in (f"Job {name}", f"Pod {name}", f"pod group {ns}/{name}"):
            return sw.key
        for ref in sw.api.metadata.owner_references:
            if ref.kind in ("Job", "Pod") and ref.name == name:
                return sw.key
    return None


# --- formatting ---------------------------------------------------------------------------------


def _q(amount: int, resource: str) -> str:
    return format_quantity(amount, resource)


def _position(p: int | None) -> str:
    return "-" if p is None else f"{p + 1}"


def _pending_lines(d: PendingDetails) -> list[str]:
    out = [f"reason: {d.reason}", f"message: {d.message}"]
    for ps in d.pod_sets:
        flavors = ", ".join(f"{r}={f}" for r, f in sorted(ps.flavors.items())) or "none"
        out.append(f"pod set {ps.name} ({ps.count} pods): {Mode(ps.mode).name}, flavors: {flavors}")
        for s in ps.skipped:
            out.append(f"  flavor {s.flavor} skipped: {s.why}")
        for r in ps.resources:
            line = (
                f"  flavor {r.flavor}, {r.resource}: requested {_q(r.requested, r.resource)}, "
                f"available {_q(r.available, r.resource)} (nominal {_q(r.nominal, r.resource)}, "
                f"borrowable {_q(r.borrowable, r.resource)}), "
                f"missing {_q(r.missing, r.resource)}"
            )
            if r.exceeds_max:
                line += f"; more than the most ever available ({_q(r.max_capacity, r.resource)})"
            out.append(line)
    return out


def _preemption_lines(s: VictimSearch | None, d: PendingDetails | None) -> list[str]:
    if s is None:
        if d is not None and d.preemption_targets:
            return ["preemption: would evict " + ", ".join(d.preemption_targets)]
        return ["preemption: not needed or not searched (no flavor needs it)"]
    out = [f"preemption: {s.message}"]
    if s.waiting_for:
        out.append("  waiting for the eviction of: " + ", ".join(s.waiting_for))
    chosen = [n for n in s.candidates if n.chosen]
    others = [n for n in s.candidates if not n.chosen]
    if chosen:
        out.append("  would evict:")
        out += [
            f"    {n.workload} ({n.cluster_queue}, priority {n.preemption_priority}): {n.message}"
            for n in chosen
        ]
    usable = [n for n in others if n.usable]
    if usable:
        out.append("  candidates not needed:")
        out += [f"    {n.workload} ({n.cluster_queue}): {n.message}" for n in usable]
    protected = [n for n in others if not n.usable]
    if protected:
        out.append("  protected:")
        out += [f"    {n.workload} ({n.cluster_queue}): {n.why}: {n.message}" for n in protected]
    return out


def format_text(e: Explanation) -> str:
    if not e.found:
        return f"workload {e.key} not found"
    lines = [f"Workload {e.key}: {e.state}"]
    lines.append(f"LocalQueue {e.local_queue}, ClusterQueue {e.cluster_queue or '(none)'}")
    if e.pending is not None:
        d = e.pending
        lines.append(
            f"position: {_position(d.position_in_cluster_queue)} in ClusterQueue, "
            f"{_position(d.position_in_local_queue)} in LocalQueue (1 = next)"
        )
        lines += _pending_lines(d)
        lines += _preemption_lines(e.preemption, d)
    if e.admission is not None:
        lines.append(f"admitted in ClusterQueue {e.admission.cluster_queue}")
        for ps in e.pod_sets:
            flavors = ", ".join(f"{r}={f}" for r, f in sorted(ps.flavors.items()))
            lines.append(f"pod set {ps.name} ({ps.count} pods): {flavors}")
            for covered, notes in ps.groups:
                lines.append(f"  flavors for {', '.join(covered)}, in the ClusterQueue's order:")
                for n in notes:
                    if n.chosen:
                        why = "chosen: the first in order that fit (or could preempt)"
                    elif n.mismatch:
                        why = f"not usable: {n.mismatch}"
                    else:
                        why = "usable by the pod set; not chosen"
                    lines.append(f"    {n.flavor}: {why}")
        for (flavor, resource), (used, nominal) in sorted(e.borrowing.items()):
            state = "borrowing" if used > nominal else "within nominal quota"
            lines.append(
                f"ClusterQueue usage {flavor}/{resource}: {_q(used, resource)} of nominal "
                f"{_q(nominal, resource)} ({state})"
            )
    if e.admitted_now:
        lines.append("the controller would first admit: " + ", ".join(e.admitted_now))
    return "\n".join(lines)


def to_json(e: Explanation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": e.key,
        "found": e.found,
        "state": e.state,
        "localQueue": e.local_queue,
        "clusterQueue": e.cluster_queue,
    }
    d = e.pending
    if d is not None:
        out["pending"] = {
            "reason": str(d.reason),
            "message": d.message,
            "positionInClusterQueue": d.position_in_cluster_queue,
            "positionInLocalQueue": d.position_in_local_queue,
            "podSets": [
                {
                    "name": ps.name,
                    "count": ps.count,
                    "mode": Mode(ps.mode).name,
                    "flavors": dict(sorted(ps.flavors.items())),
                    "skippedFlavors": [{"flavor": s.flavor, "why": s.why} for s in ps.skipped],
                    "shortfalls": [
                        {
                            "flavor": r.flavor,
                            "resource": r.resource,
                            "requested": _q(r.requested, r.resource),
                            "available": _q(r.available, r.resource),
                            "nominal": _q(r.nominal, r.resource),
                            "borrowable": _q(r.borrowable, r.resource),
                            "missing": _q(r.missing, r.resource),
                            "maxCapacity": _q(r.max_capacity, r.resource),
                            "exceedsMaxQuota": r.exceeds_max,
                        }
                        for r in ps.resources
                    ],
                }
                for ps in d.pod_sets
            ],
            "preemptionTargets": list(d.preemption_targets),
        }
    s = e.preemption
    if s is not None:
        out["preemption"] = {
            "message": s.message,
            "waitingFor": list(s.waiting_for),
            "candidates": [
                {
                    "workload": n.workload,
                    "clusterQueue": n.cluster_queue,
                    "priority": n.priority,
                    "preemptionPriority": n.preemption_priority,
                    "usable": n.usable,
                    "chosen": n.chosen,
                    "why": n.why,
                    "message": n.message,
                }
                for n in s.candidates
            ],
        }
    if e.admission is not None:
        out["admission"] = {
            "clusterQueue": e.admission.cluster_queue,
            "podSets": [
                {
                    "name": ps.name,
                    "count": ps.count,
                    "flavors": dict(sorted(ps.flavors.items())),
                    "flavorOrder": [
                        {
                            "resources": list(covered),
                            "flavors": [
                                {"flavor": n.flavor, "chosen": n.chosen, "mismatch": n.mismatch}
                                for n in notes
                            ],
                        }
                        for covered, notes in ps.groups
                    ],
                }
                for ps in e.pod_sets
            ],
        }
    if e.admitted_now:
        out["admittedFirst"] = e.admitted_now
    return out


# --- the command ------------------------------------------------------------------------------


@click.command(name="explain")
@click.argument("workload", metavar="NAMESPACE/NAME")
@click.option(
    "--file",
    "-f",
    "files",
    multiple=True,
    help="Read the objects from manifests (`-` for stdin) instead of a cluster.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Kubeconfig of the cluster (default: in-cluster, else the default kubeconfig).",
)
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text")
def explain_command(
    workload: str, files: Sequence[str], kubeconfig: str | None, output: str
) -> None:
    """Explain why WORKLOAD (a Workload, or a Job or Pod) is pending, or its flavors."""
    if "/" not in workload:
        raise click.BadParameter("expected NAMESPACE/NAME", param_hint="NAMESPACE/NAME")
    objects = read_manifests(files).objects if files else _cluster_objects(kubeconfig)
    try:
        scenario = build_scenario(objects)
    except LoadError as err:
        raise InvalidInput(str(err)) from err
    key = _find(scenario, workload) or workload
    result = explain(scenario, key, preemptor=default_preemptor())
    if output == "json":
        click.echo(json.dumps(to_json(result), indent=2))
    else:
        click.echo(format_text(result))
    if not result.found:
        raise SystemExit(EXIT_NOT_FOUND)
