"""Objects from command-line flags, in kueuectl's syntax, validated by the kqueue.io models.

Syntax (kueuectl's ``create``):

* quotas: ``FLAVOR:RESOURCE=QUANTITY;RESOURCE=QUANTITY``, several flavors separated by commas or
  given in repeated flags: ``--nominal-quota "default:cpu=9;memory=36Gi,spot:cpu=4"``;
* key/value maps: ``key=value,key2=value2`` (``--node-labels``, ``--namespace-selector``);
* taints ``KEY[=VALUE]:EFFECT``, tolerations ``KEY[=VALUE][:EFFECT]`` (no value: operator
  Exists; an empty key with an effect tolerates every taint of that effect).

Flavors listing the same resources form one resource group, in the order given; flavors whose
resources overlap without being the same are refused, as the API would. Unlike kueuectl, a
borrowing or lending limit may name only some of a flavor's resources (the others have none).

Every object is then read by :func:`kqueue.api.v1alpha1.parse_object`, so a bad value is
reported with its field path and what is allowed, plus the flag it came from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kqueue.api.quantity import ALLOWED_FORMS, QuantityError, parse_quantity
from kqueue.api.v1alpha1 import API_VERSION, ValidationFailed, parse_object

Obj = dict[str, Any]

NOMINAL_QUOTA = "--nominal-quota"
BORROWING_LIMIT = "--borrowing-limit"
LENDING_LIMIT = "--lending-limit"

_LIMIT_FIELDS = {
    NOMINAL_QUOTA: "nominalQuota",
    BORROWING_LIMIT: "borrowingLimit",
    LENDING_LIMIT: "lendingLimit",
}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Field paths of the generated objects and the flags that set them, to name the flag in errors.
_FLAG_OF_FIELD: tuple[tuple[str, str], ...] = (
    ("metadata.name", "NAME"),
    ("metadata.namespace", "--namespace"),
    ("spec.cohortName", "--cohort"),
    ("spec.queueingStrategy", "--queuing-strategy"),
    ("spec.namespaceSelector", "--namespace-selector"),
    ("spec.preemption.reclaimWithinCohort", "--reclaim-within-cohort"),
    ("spec.preemption.withinClusterQueue", "--preemption-within-cluster-queue"),
    ("spec.resourceGroups", "--nominal-quota/--borrowing-limit/--lending-limit"),
    ("spec.clusterQueue", "--clusterqueue"),
    ("spec.nodeLabels", "--node-labels"),
    ("spec.nodeTaints", "--node-taints"),
    ("spec.tolerations", "--tolerations"),
)


class FlagError(ValueError):
    """A flag value that cannot be read; the message names the flag, the value and the rule."""


def _items(values: Sequence[str]) -> list[str]:
    """Repeated flags and comma-separated lists alike (pflag's StringSlice)."""
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


# -- quotas -------------------------------------------------------------------------------------


@dataclass
class _FlavorQuota:
    name: str
    resources: dict[str, dict[str, str]] = field(default_factory=dict)  # resource -> field -> q


_QUOTA_RE = re.compile(r"^(?P<flavor>[^:;=\s]+):(?P<resources>.+)$")


def _parse_quota(spec: str, flag: str) -> tuple[str, list[tuple[str, str]]]:
    m = _QUOTA_RE.match(spec)
    if m is None:
        raise FlagError(
            f"{flag} {spec!r}: expected FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...] "
            "(e.g. default:cpu=9;memory=36Gi)"
        )
    out: list[tuple[str, str]] = []
    for part in m.group("resources").split(";"):
        part = part.strip()
        if not part:
            continue
        name, eq, quantity = part.partition("=")
        name, quantity = name.strip(), quantity.strip()
        if not eq or not name or not quantity:
            raise FlagError(f"{flag} {spec!r}: {part!r} is not RESOURCE=QUANTITY (e.g. cpu=9)")
        try:
            parse_quantity(quantity, name)
        except QuantityError:
            raise FlagError(
                f"{flag} {spec!r}: {name}: {quantity!r} is not a quantity (allowed: {ALLOWED_FORMS})"
            ) from None
        if any(r == name for r, _ in out):
            raise FlagError(f"{flag} {spec!r}: resource {name} is given twice")
        out.append((name, quantity))
    if not out:
        raise FlagError(f"{flag} {spec!r}: no RESOURCE=QUANTITY after the flavor")
    return m.group("flavor"), out


def resource_groups(
    nominal: Sequence[str], borrowing: Sequence[str] = (), lending: Sequence[str] = ()
) -> list[Obj]:
    """``spec.resourceGroups`` from the three quota flags."""
    flavors: dict[str, _FlavorQuota] = {}
    for spec in _items(nominal):
        name, resources = _parse_quota(spec, NOMINAL_QUOTA)
        if name in flavors:
            raise FlagError(f"{NOMINAL_QUOTA}: flavor {name} is given twice")
        flavors[name] = _FlavorQuota(name, {r: {"nominalQuota": q} for r, q in resources})
    for flag, values in ((BORROWING_LIMIT, borrowing), (LENDING_LIMIT, lending)):
        seen: set[str] = set()
        for spec in _items(values):
            name, resources = _parse_quota(spec, flag)
            fq = flavors.get(name)
            if fq is None:
                raise FlagError(
                    f"{flag} {spec!r}: flavor {name} has no {NOMINAL_QUOTA} (flavors with "
                    f"quota: {', '.join(flavors) or 'none'})"
                )
            if name in seen:
                raise FlagError(f"{flag}: flavor {name} is given twice")
            seen.add(name)
            for r, q in resources:
                if r not in fq.resources:
                    raise FlagError(
                        f"{flag} {spec!r}: resource {r} of flavor {name} has no "
                        f"{NOMINAL_QUOTA} (its resources: {', '.join(fq.resources)})"
                    )
                fq.resources[r][_LIMIT_FIELDS[flag]] = q
    groups: list[tuple[list[str], list[_FlavorQuota]]] = []
    for fq in flavors.values():
        covered = list(fq.resources)
        for group_covered, members in groups:
            if set(group_covered) == set(covered):
                members.append(fq)
                break
            if set(group_covered) & set(covered):
                other = members[0].name
                raise FlagError(
                    f"{NOMINAL_QUOTA}: flavor {fq.name} covers {', '.join(covered)} but flavor "
                    f"{other} covers {', '.join(group_covered)}: flavors that share a resource "
                    "must cover the same resources (one resource group)"
                )
        else:
            groups.append((covered, [fq]))
    return [
        {
            "coveredResources": covered,
            "flavors": [
                {
                    "name": fq.name,
                    # In the group's order: the API wants each flavor's resources in it.
                    "resources": [{"name": r, **fq.resources[r]} for r in covered],
                }
                for fq in members
            ],
        }
        for covered, members in groups
    ]


# -- maps, taints, tolerations ------------------------------------------------------------------


def key_values(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in _items(values):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise FlagError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def _key_value_effect(item: str, flag: str) -> tuple[str, str | None, str | None]:
    head, colon, effect = item.partition(":")
    if ":" in effect:
        raise FlagError(f"{flag} {item!r}: expected KEY[=VALUE][:EFFECT]")
    key, eq, value = head.partition("=")
    if colon and effect not in _EFFECTS:
        raise FlagError(
            f"{flag} {item!r}: unknown effect {effect!r} (allowed: {', '.join(_EFFECTS)})"
        )
    return key.strip(), (value.strip() if eq else None), (effect if colon else None)


def taints(values: Sequence[str]) -> list[Obj]:
    out: list[Obj] = []
    for item in _items(values):
        key, value, effect = _key_value_effect(item, "--node-taints")
        if not key or effect is None:
            raise FlagError(f"--node-taints {item!r}: expected KEY[=VALUE]:EFFECT")
        if any(t["key"] == key and t["effect"] == effect for t in out):
            raise FlagError(f"--node-taints: taint {key}:{effect} is given twice")
        taint: Obj = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return out


def tolerations(values: Sequence[str]) -> list[Obj]:
    out: list[Obj] = []
    for item in _items(values):
        key, value, effect = _key_value_effect(item, "--tolerations")
        if not key and effect is None:
            raise FlagError(f"--tolerations {item!r}: expected KEY[=VALUE][:EFFECT]")
        tol: Obj = {}
        if key:
            tol["key"] = key
        if value is not None:
            tol["operator"] = "Equal"
            tol["value"] = value
        else:
            tol["operator"] = "Exists"
        if effect:
            tol["effect"] = effect
        out.append(tol)
    return out


# -- objects ------------------------------------------------------------------------------------


def _flag_for(path: str) -> str:
    for prefix, flag in _FLAG_OF_FIELD:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return flag
    return ""


def validated(doc: Obj) -> Obj:
    """``doc`` read by the kqueue.io models and written back (defaults applied); a FlagError
    naming each bad field, what is allowed and the flag that set it."""
    try:
        return parse_object(doc).to_dict()
    except ValidationFailed as err:
        lines = []
        for e in err.errors:
            flag = _flag_for(e.path)
            lines.append(f"{e} (from {flag})" if flag else str(e))
        raise FlagError("\n".join(lines)) from None


def cluster_queue(
    name: str,
    *,
    cohort: str | None = None,
    queuing_strategy: str | None = None,
    namespace_selector: Sequence[str] = (),
    reclaim_within_cohort: str | None = None,
    preemption_within_cluster_queue: str | None = None,
    nominal_quota: Sequence[str] = (),
    borrowing_limit: Sequence[str] = (),
    lending_limit: Sequence[str] = (),
) -> Obj:
    """A ClusterQueue as kueuectl creates it: every namespace may submit unless
    ``--namespace-selector`` narrows it."""
    spec: Obj = {
        "namespaceSelector": {"matchLabels": key_values(namespace_selector, "--namespace-selector")}
        if namespace_selector
        else {},
        "resourceGroups": resource_groups(nominal_quota, borrowing_limit, lending_limit),
    }
    if cohort:
        spec["cohortName"] = cohort
    if queuing_strategy:
        spec["queueingStrategy"] = queuing_strategy
    preemption: Obj = {}
    if reclaim_within_cohort:
        preemption["reclaimWithinCohort"] = reclaim_within_cohort
    if preemption_within_cluster_queue:
        preemption["withinClusterQueue"] = preemption_within_cluster_queue
    if preemption:
        spec["preemption"] = preemption
    return validated(
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def local_queue(name: str, namespace: str, cluster_queue: str) -> Obj:
    return validated(
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


def resource_flavor(
    name: str,
    *,
    node_labels: Sequence[str] = (),
    node_taints: Sequence[str] = (),
    toleration_specs: Sequence[str] = (),
) -> Obj:
    spec: Obj = {}
    if node_labels:
        spec["nodeLabels"] = key_values(node_labels, "--node-labels")
    if node_taints:
        spec["nodeTaints"] = taints(node_taints)
    if toleration_specs:
        spec["tolerations"] = tolerations(toleration_specs)
    return validated(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": spec,
        }
    )
