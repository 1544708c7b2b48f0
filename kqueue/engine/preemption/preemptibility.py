"""Whether a workload may be preempted: the precedence chain of docs/contracts.md §3.

First that applies: ``Workload.spec.preemptibility``; the ``kqueue.io/preemptibility`` label of the
top-level owner; that label on the pods; then, if the ClusterQueue sets
``preemptiblePriorityThreshold``, preemptible iff the preemption priority is at most the threshold;
otherwise preemptible. Invalid label values are skipped and reported so that the controller can
emit a warning event. A pure function: the engine and the controller share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..types import Preemptibility

# Label values (kebab-case, as the label is written on Jobs and Pods).
LABEL_VALUES: dict[str, Preemptibility] = {
    "preemptible": Preemptibility.PREEMPTIBLE,
    "non-preemptible": Preemptibility.NON_PREEMPTIBLE,
}


class PreemptibilitySource(StrEnum):
    SPEC = "spec"
    OWNER_LABEL = "ownerLabel"
    POD_LABEL = "podLabel"
    PRIORITY_THRESHOLD = "priorityThreshold"
    DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class PreemptibilityResolution:
    value: Preemptibility
    source: PreemptibilitySource
    # Human-readable warnings for ignored (invalid) label values, in chain order.
    warnings: tuple[str, ...] = ()


def parse_label(value: str | None) -> Preemptibility | None:
    """A label value as a Preemptibility; None when absent or invalid."""
    if value is None:
        return None
    return LABEL_VALUES.get(value)


def resolve_preemptibility(
    *,
    spec: Preemptibility | None,
    owner_label: str | None,
    pod_label: str | None,
    preemption_priority: int,
    priority_threshold: int | None,
) -> PreemptibilityResolution:
    warnings: list[str] = []
    if spec is not None:
        return PreemptibilityResolution(spec, PreemptibilitySource.SPEC)
    for raw, source, where in (
        (owner_label, PreemptibilitySource.OWNER_LABEL, "top-level owner"),
        (pod_label, PreemptibilitySource.POD_LABEL, "pods"),
    ):
        if raw is None:
            continue
        parsed = parse_label(raw)
        if parsed is None:
            warnings.append(
                f"ignoring invalid value {raw!r} of label kqueue.io/preemptibility on the {where}; "
                f"expected one of: {', '.join(sorted(LABEL_VALUES))}"
            )
            continue
        return PreemptibilityResolution(parsed, source, tuple(warnings))
    if priority_threshold is not None:
        value = (
            Preemptibility.PREEMPTIBLE
            if preemption_priority <= priority_threshold
            else Preemptibility.NON_PREEMPTIBLE
        )
        return PreemptibilityResolution(value, PreemptibilitySource.PRIORITY_THRESHOLD, tuple(warnings))
    return PreemptibilityResolution(
        Preemptibility.PREEMPTIBLE, PreemptibilitySource.DEFAULT, tuple(warnings)
    )
