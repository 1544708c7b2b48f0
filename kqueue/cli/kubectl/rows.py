"""Table rows of each kind, from the objects as the API server returns them.

Pure functions of (object, positions, now): ``kubectl kqueue list`` feeds them what it read,
tests feed them literal objects. Columns follow kueuectl's where it has them, plus what kqueue
adds (positions, pending reason, usage against nominal quota per flavor and resource).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kqueue.api.quantity import QuantityError, canonical
from kqueue.api.v1alpha1 import constants as c
from kqueue.cli.kubectl.printing import age, human_duration
from kqueue.visibility.pending import PendingWorkload

Obj = dict[str, Any]


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: list[list[str]]


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def condition(obj: Obj, type_: str) -> Obj | None:
    for cond in _status(obj).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def _is_true(obj: Obj, type_: str) -> bool:
    cond = condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


def _q(value: Any, resource: str) -> str:
    try:
        return canonical(str(value), resource)
    except QuantityError:
        return str(value)


def _with_namespace(all_namespaces: bool, obj: Obj, cells: list[str]) -> list[str]:
    return [str(_meta(obj).get("namespace", "")), *cells] if all_namespaces else cells


# -- workloads ----------------------------------------------------------------------------------


def workload_status(wl: Obj) -> str:
    """Kueue's workload status words: finished, admitted, quotaReserved or pending."""
    if _is_true(wl, c.FINISHED):
        return "FINISHED"
    if _is_true(wl, c.ADMITTED):
        return "ADMITTED"
    if _is_true(wl, c.QUOTA_RESERVED):
        return "QUOTARESERVED"
    return "PENDING"


def workload_checks(wl: Obj) -> tuple[str, str]:
    """The admission checks of a workload: (``prov=Pending ext=Ready``, their messages)."""
    states = _status(wl).get("admissionChecks") or []
    summary = " ".join(f"{s.get('name', '')}={s.get('state', '')}" for s in states)
    messages = "; ".join(
        f"{s.get('name', '')}: {s.get('message')}" for s in states if s.get("message")
    )
    return summary, messages


def workload_flavors(wl: Obj) -> str:
    """The admission's flavors per pod set: ``main:default`` (``driver:a workers:b,c``)."""
    admission = _status(wl).get("admission") or {}
    parts = []
    for psa in admission.get("podSetAssignments") or []:
        flavors = sorted(set((psa.get("flavors") or {}).values()))
        parts.append(f"{psa.get('name', 'main')}:{','.join(flavors)}")
    return " ".join(parts)


def workload_cluster_queue(wl: Obj, lq_targets: Mapping[str, str]) -> str:
    """The ClusterQueue it is admitted in, else the one its LocalQueue points to."""
    admitted = (_status(wl).get("admission") or {}).get("clusterQueue")
    if admitted:
        return str(admitted)
    ns = _meta(wl).get("namespace", "")
    return lq_targets.get(f"{ns}/{_spec(wl).get('queueName', '')}", "")


def cluster_cell(cluster_name: str | None, nominated: Sequence[str]) -> str:
    """MultiKueue: the worker cluster a workload runs on (``status.clusterName``), else the
    workers its copies are offered to (``nominated:a,b``), else nothing (shared with the web
    view)."""
    if cluster_name:
        return cluster_name
    return "nominated:" + ",".join(nominated) if nominated else ""


def workload_cluster(wl: Obj) -> str:
    status = _status(wl)
    return cluster_cell(status.get("clusterName"), status.get("nominatedClusterNames") or [])


def _owner(wl: Obj) -> str:
    refs = _meta(wl).get("ownerReferences") or []
    return ", ".join(f"{r.get('kind', '').lower()}/{r.get('name', '')}" for r in refs)


def _pending_why(
    wl: Obj, item: PendingWorkload | None, why: tuple[str, str] | None
) -> tuple[str, str]:
    """(reason, message) of a pending workload: the engine's, else its QuotaReserved=False."""
    if item is not None:
        return item.reason, item.message
    if why is not None:
        return why
    cond = condition(wl, c.QUOTA_RESERVED)
    if cond is not None and cond.get("status") == "False":
        return str(cond.get("reason", "")), str(cond.get("message", ""))
    return "", ""


def workloads_table(
    workloads: Sequence[Obj],
    *,
    now: datetime,
    lq_targets: Mapping[str, str],
    queued: Mapping[str, PendingWorkload],
    reasons: Mapping[str, tuple[str, str]] | None = None,
    all_namespaces: bool = False,
    wide: bool = False,
) -> Table:
    """``queued``: positions of queued workloads by ``ns/name``; ``reasons``: why the others
    that wait aside (no LocalQueue, deactivated...) are pending, by ``ns/name``."""
    headers = [
        "NAME", "QUEUE", "CLUSTERQUEUE", "STATUS", "POSITION", "REASON", "FLAVORS", "AGE", "ETA"
    ]
    if wide:
        # CLUSTER in the wide view, as the Workload CRD's Cluster column (priority 1); the
        # message stays last, it is the long one.
        headers += ["CQ POSITION", "PRIORITY", "OWNER", "CLUSTER", "MESSAGE"]
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    rows = []
    for wl in workloads:
        meta = _meta(wl)
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        status = workload_status(wl)
        item = queued.get(key)
        reason = message = ""
        if status == "PENDING":
            reason, message = _pending_why(wl, item, (reasons or {}).get(key))
        elif status == "FINISHED":
            cond = condition(wl, c.FINISHED) or {}
            reason, message = str(cond.get("reason", "")), str(cond.get("message", ""))
        elif status == "QUOTARESERVED":
            # Quota held, waiting for its admission checks: which, in what state, and why.
            reason, message = workload_checks(wl)
        cells = [
            str(meta.get("name", "")),
            str(_spec(wl).get("queueName", "")),
            workload_cluster_queue(wl, lq_targets),
            status,
            str(item.position_in_local_queue) if item is not None else "",
            reason,
            workload_flavors(wl),
            age(wl, now),
            eta(item.estimated_start if item is not None else None, now) if status == "PENDING"
            else "",
        ]
        if wide:
            priority = item.priority if item is not None else _spec(wl).get("priority", "")
            cells += [
                str(item.position_in_cluster_queue) if item is not None else "",
                str(priority if priority is not None else ""),
                _owner(wl),
                workload_cluster(wl),
                message,
            ]
        rows.append(_with_namespace(all_namespaces, wl, cells))
    return Table(tuple(headers), rows)


# -- ClusterQueues ------------------------------------------------------------------------------


def cluster_queue_usage(cq: Obj) -> str:
    """Reserved against nominal quota per flavor and resource, in the spec's order:
    ``default/cpu 3/9, default/memory 12Gi/36Gi``."""
    used: dict[tuple[str, str], str] = {}
    for fu in _status(cq).get("flavorsReservation") or []:
        for ru in fu.get("resources") or []:
            used[(str(fu.get("name")), str(ru.get("name")))] = str(ru.get("total", "0"))
    parts = []
    for rg in _spec(cq).get("resourceGroups") or []:
        for fq in rg.get("flavors") or []:
            for rq in fq.get("resources") or []:
                flavor, resource = str(fq.get("name")), str(rq.get("name"))
                total = used.get((flavor, resource), "0")
                nominal = rq.get("nominalQuota", "0")
                parts.append(f"{flavor}/{resource} {_q(total, resource)}/{_q(nominal, resource)}")
    return ", ".join(parts)


def _active(obj: Obj) -> str:
    cond = condition(obj, c.ACTIVE)
    return str(cond.get("status", "")) if cond is not None else "Unknown"


def cluster_queues_table(cqs: Sequence[Obj], *, now: datetime, wide: bool = False) -> Table:
    headers = ["NAME", "COHORT", "PENDING", "ADMITTED", "ACTIVE", "USAGE", "AGE"]
    if wide:
        headers += ["STRATEGY", "STOP POLICY", "ACTIVE REASON"]
    rows = []
    for cq in cqs:
        st = _status(cq)
        cells = [
            str(_meta(cq).get("name", "")),
            str(_spec(cq).get("cohortName", "") or ""),
            str(st.get("pendingWorkloads", 0)),
            str(st.get("admittedWorkloads", 0)),
            _active(cq),
            cluster_queue_usage(cq),
            age(cq, now),
        ]
        if wide:
            cond = condition(cq, c.ACTIVE) or {}
            cells += [
                str(_spec(cq).get("queueingStrategy", "BestEffortFIFO")),
                str(_spec(cq).get("stopPolicy", "None")),
                str(cond.get("reason", "")),
            ]
        rows.append(cells)
    return Table(tuple(headers), rows)


# -- LocalQueues --------------------------------------------------------------------------------


def local_queues_table(
    lqs: Sequence[Obj], *, now: datetime, all_namespaces: bool = False, wide: bool = False
) -> Table:
    headers = ["NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED", "ACTIVE", "AGE"]
    if wide:
        headers += ["STOP POLICY", "ACTIVE REASON", "FS WEIGHT", "CONSUMED"]
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    rows = []
    for lq in lqs:
        st = _status(lq)
        cells = [
            str(_meta(lq).get("name", "")),
            str(_spec(lq).get("clusterQueue", "") or ""),
            str(st.get("pendingWorkloads", 0)),
            str(st.get("admittedWorkloads", 0)),
            _active(lq),
            age(lq, now),
        ]
        if wide:
            cond = condition(lq, c.ACTIVE) or {}
            cells += [str(_spec(lq).get("stopPolicy", "None")), str(cond.get("reason", ""))]
            cells += [_lq_weight(lq), _consumed(lq)]
        rows.append(_with_namespace(all_namespaces, lq, cells))
    return Table(tuple(headers), rows)


def _lq_weight(lq: Obj) -> str:
    """spec.fairSharing.weight (admission fair sharing), 1 when unset."""
    return str((_spec(lq).get("fairSharing") or {}).get("weight", "1"))


def _consumed(lq: Obj) -> str:
    """Admission fair sharing's decayed usage (status), ``-`` when there is none."""
    afs = (_status(lq).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
    consumed = afs.get("consumedResources") or {}
    return ",".join(f"{r}={_q(v, r)}" for r, v in sorted(consumed.items())) or "-"


# -- ResourceFlavors ----------------------------------------------------------------------------


def _taint(t: Obj) -> str:
    key = str(t.get("key", "") or "")
    value = t.get("value")
    effect = t.get("effect")
    text = f"{key}={value}" if value else key
    if t.get("operator") == "Exists" and not key:
        text = "*"
    return f"{text}:{effect}" if effect else text


def resource_flavors_table(rfs: Sequence[Obj], *, now: datetime, wide: bool = False) -> Table:
    headers = ["NAME", "NODE LABELS", "AGE"]
    if wide:
        headers += ["NODE TAINTS", "TOLERATIONS"]
    rows = []
    for rf in rfs:
        spec = _spec(rf)
        labels = ",".join(f"{k}={v}" for k, v in sorted((spec.get("nodeLabels") or {}).items()))
        cells = [str(_meta(rf).get("name", "")), labels, age(rf, now)]
        if wide:
            cells += [
                ",".join(_taint(t) for t in spec.get("nodeTaints") or []),
                ",".join(_taint(t) for t in spec.get("tolerations") or []),
            ]
        rows.append(cells)
    return Table(tuple(headers), rows)


# -- pending ------------------------------------------------------------------------------------


# A pending workload without a predicted start (no history for what it waits on).
NO_ETA = "<unknown>"


def eta(start: datetime | None, now: datetime) -> str:
    """The ETA cell: how long until the predicted start ("now" once it is due)."""
    if start is None:
        return NO_ETA
    if start <= now:
        return "now"
    return human_duration(start - now)


def pending_table(items: Sequence[PendingWorkload], *, now: datetime) -> Table:
    headers = (
        "CQ POSITION",
        "LQ POSITION",
        "NAMESPACE",
        "NAME",
        "LOCALQUEUE",
        "PRIORITY",
        "REASON",
        "AGE",
        "ETA",
        "MESSAGE",
    )
    rows = [
        [
            str(i.position_in_cluster_queue),
            str(i.position_in_local_queue),
            i.namespace,
            i.name,
            i.local_queue,
            str(i.priority),
            i.reason,
            human_duration(now - i.created),
            eta(i.estimated_start, now),
            i.message,
        ]
        for i in items
    ]
    return Table(headers, rows)
