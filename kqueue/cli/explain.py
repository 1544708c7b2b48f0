"""``kqueue explain NS/NAME``: why a workload is pending, or why it has the flavors it has.

The objects come from a live cluster (``--kubeconfig``, the in-cluster service account, or the
default kubeconfig) or from manifests (``--file``); the same Engine as the controller's then looks
at the workload (``kqueue.sim.explain``). This module only fetches and formats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click

from kqueue.api.integrations import registry
from kqueue.api.integrations.declaration import Workloads
from kqueue.api.loader import LoadedObject, LoadError
from kqueue.api.quantity import format_quantity
from kqueue.api.suggest import closest, did_you_mean
from kqueue.api.v1alpha1 import format_time
from kqueue.cli.cluster import cluster_objects, current_namespace
from kqueue.cli.manifests import InvalidInput, read_manifests
from kqueue.engine.explain import PendingDetails
from kqueue.engine.forecast.forward import spoken
from kqueue.engine.preemption.report import VictimSearch
from kqueue.engine.types import Mode
from kqueue.sim.explain import Explanation, explain
from kqueue.sim.scenario import Scenario, build_scenario
from kqueue.visibility import estimates

EXIT_NOT_FOUND = 1


# --- finding ------------------------------------------------------------------------------------


def context_namespace(kubeconfig: str | None) -> str:
    """The namespace kubectl would use: the current context's, else ``default``."""
    return current_namespace(kubeconfig)


def _key(workload: str, namespace: str | None, default_namespace: str) -> str:
    """``NAMESPACE/NAME`` from the argument and ``--namespace``; they must not disagree."""
    if "/" in workload:
        ns, _, name = workload.partition("/")
        if not ns or not name or "/" in name:
            raise click.BadParameter(
                f"{workload!r}: expected NAME or NAMESPACE/NAME", param_hint="[NAMESPACE/]NAME"
            )
        if namespace is not None and namespace != ns:
            raise click.BadParameter(
                f"{workload!r} names namespace {ns!r} but --namespace is {namespace!r}; give one",
                param_hint="[NAMESPACE/]NAME",
            )
        return workload
    return f"{namespace or default_namespace}/{workload}"

# Kinds whose objects a person may name instead of their Workload (a Job, a Pod, any kind with
# one Workload per object).
_OWNER_KINDS = frozenset(
    i.kind for i in registry.INTEGRATIONS if i.workloads in (Workloads.OWN, Workloads.POD)
)


def _names(scenario: Scenario) -> dict[str, str]:
    """Every name a person may give for a workload (its own, its Job's, its Pod's, its pod
    group's) as ``namespace/name``, with the Workload key it stands for."""
    out: dict[str, str] = {}
    for sw in scenario.workloads:
        ns = sw.api.namespace or "default"
        out[sw.key] = sw.key
        kind, _, name = sw.source.partition(" ")
        if kind in _OWNER_KINDS:
            out.setdefault(f"{ns}/{name}", sw.key)
        elif sw.source.startswith("pod group "):
            out.setdefault(sw.source.removeprefix("pod group "), sw.key)
        for ref in sw.api.metadata.owner_references:
            if ref.kind in _OWNER_KINDS:
                out.setdefault(f"{ns}/{ref.name}", sw.key)
    return out


def not_found_hint(scenario: Scenario, key: str) -> str:
    """Why ``key`` names no workload, with the closest name there is."""
    ns, _, name = key.partition("/")
    names = _names(scenario)
    here = [k.partition("/")[2] for k in names if k.partition("/")[0] == ns]
    # Elsewhere the name alone decides (a namespace typo is no reason to suggest anything).
    elsewhere: dict[str, str] = {}
    for k in sorted(names):
        other_ns, _, other = k.partition("/")
        if other_ns != ns:
            elsewhere.setdefault(other, k)
    # The exact name in another namespace first: the namespace is the likelier mistake.
    if name in elsewhere:
        return f'did you mean "{elsewhere[name]}"?'
    best = closest(name, here)
    if best is not None:
        return f'did you mean "{ns}/{best}"?'
    best = closest(name, elsewhere)
    if best is not None:
        return f'did you mean "{elsewhere[best]}"?'
    if not here:
        namespaces = sorted({k.partition("/")[0] for k in names})
        return f"namespace {ns} has no workloads" + (
            f" (namespaces with workloads: {', '.join(namespaces)})" if namespaces else ""
        )
    return ""


def queue_hints(scenario: Scenario, key: str) -> list[str]:
    """A workload's LocalQueue or its ClusterQueue that is not defined, with the closest."""
    sw = next((w for w in scenario.workloads if w.key == key), None)
    if sw is None or not sw.api.spec.queue_name:
        return []
    ns, queue = sw.api.namespace or "default", sw.api.spec.queue_name
    local = {lq.name: lq for lq in scenario.local_queues if (lq.namespace or "default") == ns}
    if queue not in local:
        hint = did_you_mean(queue, local)
        others = ", ".join(sorted(local)) or "none"
        return [
            f"LocalQueue {ns}/{queue} does not exist"
            + (f"; {hint}" if hint else f" (LocalQueues in {ns}: {others})")
        ]
    cq = local[queue].spec.cluster_queue
    cluster_queues = [c.name for c in scenario.cluster_queues]
    if cq and cq not in cluster_queues:
        hint = did_you_mean(cq, cluster_queues)
        return [
            f"LocalQueue {ns}/{queue} points to ClusterQueue {cq}, which does not exist"
            + (f"; {hint}" if hint else "")
        ]
    return []


def _current_cron_job(scenario: Scenario, key: str) -> str | None:
    """The Workload of a CronJob's current Job: the last one created by the start of the
    simulation (the one running or queued now), else its first to come."""
    ns = key.partition("/")[0]
    sources = {f"Job {name}" for name in scenario.cron_jobs.get(key, ())}
    mine = [sw for sw in scenario.workloads if (sw.api.namespace or "default") == ns and sw.source in sources]
    if not mine:
        return None
    started = [sw for sw in mine if sw.arrives is not None and sw.arrives <= scenario.start]
    if started:
        return max(started, key=lambda sw: sw.arrives or scenario.start).key
    return min(mine, key=lambda sw: sw.arrives or scenario.start).key


def _find(scenario: Scenario, key: str) -> str | None:
    """``key`` as a Workload, or the Workload of a Job, Pod, StatefulSet or pod group of that
    name (a Deployment's pods are each their own: ``<deployment>-<n>``), or of a CronJob's
    current Job."""
    keys = {sw.key for sw in scenario.workloads}
    if key in keys:
        return key
    if key in scenario.cron_jobs:
        return _current_cron_job(scenario, key)
    ns, _, name = key.partition("/")
    for sw in scenario.workloads:
        if (sw.api.namespace or "default") != ns:
            continue
        if sw.source in (*(f"{k} {name}" for k in _OWNER_KINDS), f"pod group {ns}/{name}"):
            return sw.key
        for ref in sw.api.metadata.owner_references:
            if ref.kind in _OWNER_KINDS and ref.name == name:
                return sw.key
    return None


# --- formatting ---------------------------------------------------------------------------------


def _q(amount: int, resource: str) -> str:
    return format_quantity(amount, resource)


def _position(p: int | None) -> str:
    return "-" if p is None else f"{p + 1}"


def _pending_lines(d: PendingDetails) -> list[str]:
    out = [f"reason: {d.reason}", f"message: {d.message}"]
    if d.fair_sharing is not None:
        out.append(f"fair sharing decided: {d.fair_sharing}")
    if d.local_queue_usages:
        usages = ", ".join(f"{lq} {usage}" for lq, usage in d.local_queue_usages)
        out.append(
            f"admission fair sharing in ClusterQueue {d.cluster_queue}: LocalQueue usages "
            f"{usages} (heads are taken from the lowest first)"
        )
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
        t = ps.topology
        if t is not None:
            out.append(f"  topology: {t.reason}")
            if t.level:
                out.append(
                    f"  domains of level {t.level} considered ({t.needed} {t.unit}s needed in one):"
                )
                out += [
                    f"    {name}: fits {fits}"
                    + ("" if fits >= t.needed else f", {t.needed - fits} short")
                    for name, fits in t.domains
                ]
    return out


def _preemption_lines(s: VictimSearch | None, d: PendingDetails | None) -> list[str]:
    if s is None:
        if d is not None and d.preemption_targets:
            return ["preemption: would evict " + ", ".join(d.preemption_targets)]
        return ["preemption: not needed or not searched (no flavor needs it)"]
    out = [f"preemption: {s.message}"]
    if s.fair_sharing:
        out.append("  fair sharing (the strategy that allowed each victim, shares compared):")
        out += [f"    {note}" for note in s.fair_sharing]
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


def _clock(at: datetime, now: datetime) -> str:
    """14:20 UTC, with the date when it is not ``now``'s day, and how far off it is."""
    at, now = at.astimezone(UTC), now.astimezone(UTC)
    day = "" if at.date() == now.date() else at.strftime("%Y-%m-%d ")
    left = int((at - now).total_seconds())
    return f"{day}{at:%H:%M} UTC" + (f" (in {spoken(left)})" if left > 0 else "")


def _expected_start_line(e: Explanation) -> str:
    p = e.expected_start
    if p is None:
        return (
            "expected start: unknown (no maximumExecutionTimeSeconds and no run-time history "
            "for the workloads it waits on)"
        )
    return estimates.describe(p, local=lambda at: _clock(at, e.predicted_at or at))


def cluster_line(e: Explanation) -> str | None:
    """MultiKueue: the worker cluster the workload runs (ran) on, else the ones its copies are
    offered to (the Workload's status.clusterName, status.nominatedClusterNames)."""
    if e.cluster_name:
        verb = "ran" if e.state == "Finished" else "runs"
        return f"MultiKueue: {verb} on worker cluster {e.cluster_name}"
    if e.nominated_clusters:
        return (
            "MultiKueue: dispatched to worker clusters " + ", ".join(e.nominated_clusters)
            + "; none has admitted it yet"
        )
    return None


def format_text(e: Explanation, hints: Sequence[str] = ()) -> str:
    if not e.found:
        return f"workload {e.key} not found" + "".join(f"; {h}" for h in hints)
    lines = [f"Workload {e.key}: {e.state}"]
    lines += [f"hint: {h}" for h in hints]
    lines.append(f"LocalQueue {e.local_queue}, ClusterQueue {e.cluster_queue or '(none)'}")
    if e.pending is not None:
        d = e.pending
        lines.append(
            f"position: {_position(d.position_in_cluster_queue)} in ClusterQueue, "
            f"{_position(d.position_in_local_queue)} in LocalQueue (1 = next)"
        )
        lines.append(_expected_start_line(e))
        lines += _pending_lines(d)
        lines += _preemption_lines(e.preemption, d)
    if e.admission is not None and e.waiting_checks:
        lines.append(
            f"quota reserved in ClusterQueue {e.admission.cluster_queue}; not admitted until "
            "every admission check is Ready (its pods are held):"
        )
        for name, state, message in e.waiting_checks:
            lines.append(f"  admission check {name}: {state}" + (f" ({message})" if message else ""))
    elif e.admission is not None:
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
    where = cluster_line(e)
    if where is not None:
        lines.append(where)
    if e.admitted_now:
        lines.append("the controller would first admit: " + ", ".join(e.admitted_now))
    for victim, preemptor, reason, message in e.preempting_now:
        lines.append(f"the controller would preempt {victim} for {preemptor} ({reason}): {message}")
    return "\n".join(lines)


def to_json(e: Explanation, hints: Sequence[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": e.key,
        "found": e.found,
        "state": e.state,
        "localQueue": e.local_queue,
        "clusterQueue": e.cluster_queue,
    }
    if hints:
        out["hints"] = list(hints)
    if e.cluster_name:
        out["clusterName"] = e.cluster_name
    if e.nominated_clusters:
        out["nominatedClusterNames"] = list(e.nominated_clusters)
    if e.waiting_checks:
        out["admissionChecks"] = [
            {"name": n, "state": st, "message": m} for n, st, m in e.waiting_checks
        ]
    d = e.pending
    if d is not None:
        p = e.expected_start
        out["expectedStart"] = None if p is None else {
            "time": format_time(p.start),
            "after": p.after,
            "basis": p.after_basis,
        }
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
                    **(
                        {
                            "topology": {
                                "reason": ps.topology.reason,
                                "level": ps.topology.level,
                                "needed": ps.topology.needed,
                                "unit": ps.topology.unit,
                                "domains": [
                                    {"name": n, "fits": f} for n, f in ps.topology.domains
                                ],
                            }
                        }
                        if ps.topology is not None
                        else {}
                    ),
                }
                for ps in d.pod_sets
            ],
            "preemptionTargets": list(d.preemption_targets),
        }
        if d.fair_sharing is not None:
            out["pending"]["fairSharing"] = d.fair_sharing
        if d.local_queue_usages:
            out["pending"]["admissionFairSharing"] = [
                {"localQueue": lq, "usage": usage} for lq, usage in d.local_queue_usages
            ]
    s = e.preemption
    if s is not None:
        out["preemption"] = {
            "message": s.message,
            "fairSharing": list(s.fair_sharing),
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
    if e.preempting_now:
        out["preemptedFirst"] = [
            {"victim": v, "preemptor": p, "reason": r, "message": m}
            for v, p, r, m in e.preempting_now
        ]
    return out


# --- the command ------------------------------------------------------------------------------


@click.command(name="explain")
@click.argument("workload", metavar="[NAMESPACE/]NAME")
@click.option(
    "--namespace",
    "-n",
    help="Namespace of NAME (default: the kubeconfig context's namespace for a cluster, "
    "`default` with --file).",
)
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
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="The controller's Configuration (kqueue's, or Kueue's config.kueue.x-k8s.io), so that "
    "fair sharing and admission fair sharing decide as in the controller. With --file it may "
    "instead be one of the documents.",
)
def explain_command(
    workload: str,
    namespace: str | None,
    files: Sequence[str],
    kubeconfig: str | None,
    output: str,
    config_file: str | None,
) -> None:
    """Explain why WORKLOAD (a Workload, or a Job or Pod) is pending, or its flavors.

    WORKLOAD is NAMESPACE/NAME, or NAME with -n NAMESPACE (or the default namespace).
    """
    if "/" not in workload and namespace is None:
        default_namespace = "default" if files else context_namespace(kubeconfig)
    else:
        default_namespace = "default"
    wanted = _key(workload, namespace, default_namespace)
    objects = read_manifests(files).objects if files else cluster_objects(kubeconfig)
    if config_file is not None:
        configs = [o for o in read_manifests((config_file,)).objects if o.config is not None]
        if len(configs) != 1:
            raise InvalidInput(f"--config {config_file}: expected one Configuration document")
        objects = [*objects, *configs]
    print_explanation(objects, wanted, output, now=None if files else datetime.now(UTC))


def explain_with_hints(
    scenario: Scenario, wanted: str, *, now: datetime | None = None
) -> tuple[Explanation, list[str]]:
    """The explanation of ``wanted`` (``namespace/name`` of a Workload, Job or Pod) and the
    hints that go with it: a missing queue, or the closest name when there is no such workload
    (shared with the web view)."""
    key = _find(scenario, wanted) or wanted
    result = explain(scenario, key, now=now)
    if result.found:
        return result, queue_hints(scenario, key)
    hint = not_found_hint(scenario, key)
    return result, [hint] if hint else []


def print_explanation(
    objects: Sequence[LoadedObject], wanted: str, output: str, *, now: datetime | None = None
) -> None:
    """Explain ``wanted`` (``namespace/name`` of a Workload, Job or Pod) among ``objects`` and
    print the answer with hints; exit status 1 when there is no such workload (shared with
    ``kubectl kqueue explain``). ``now``: the time a live cluster was read (predicted starts
    count from it; manifests use the scenario's start)."""
    try:
        scenario = build_scenario(objects)
    except LoadError as err:
        raise InvalidInput(str(err)) from err
    result, hints = explain_with_hints(scenario, wanted, now=now)
    if output == "json":
        click.echo(json.dumps(to_json(result, hints), indent=2))
    else:
        click.echo(format_text(result, hints))
    if not result.found:
        raise SystemExit(EXIT_NOT_FOUND)
