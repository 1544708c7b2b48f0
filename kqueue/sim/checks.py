"""Admission checks in simulated time (docs/admission-checks.md, docs/contracts.md §4).

A check's state comes from the input (a Workload's ``status.admissionChecks``), or from a rule
on its AdmissionCheck, annotation ``simulate.kqueue.io/check-rule``: one or more clauses
separated by ``;``, the first whose condition holds applies::

    Ready after 2m
    Provisioned if the flavor is spot          (Provisioned: Ready)
    Ready after 30s if the flavor is spot or gpu; Rejected
    Retry after 1m

``after`` counts from the quota reservation; without a clause that applies (and no state in the
input) the check stays Pending and the workload keeps its quota without being admitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from kqueue.api.durations import DurationError, format_duration, parse_duration

RULE_ANNOTATION: Final = "simulate.kqueue.io/check-rule"
STATES: Final = {"Ready": "Ready", "Provisioned": "Ready", "Retry": "Retry", "Rejected": "Rejected"}
GRAMMAR: Final = (
    "<Ready|Provisioned|Retry|Rejected> [after <duration>] [if the flavor is <flavor>[ or "
    "<flavor>...]], clauses separated by ';'"
)
_CLAUSE = re.compile(
    r"^(?P<state>\w+)(?:\s+after\s+(?P<after>\S+))?"
    r"(?:\s+if\s+the\s+flavor\s+is\s+(?P<flavors>.+))?$"
)


class RuleError(ValueError):
    """A rule that does not parse; the message says what is allowed."""


@dataclass(frozen=True, slots=True)
class Clause:
    state: str
    after: timedelta = timedelta(0)
    flavors: frozenset[str] = frozenset()  # empty: any flavor

    def applies(self, flavors: Iterable[str]) -> bool:
        return not self.flavors or bool(self.flavors & set(flavors))

    def message(self) -> str:
        when = f" after {format_duration(self.after)}" if self.after else ""
        where = f" (flavor {', '.join(sorted(self.flavors))})" if self.flavors else ""
        return f"simulated: {self.state}{when}{where}"


def parse_rule(text: str) -> tuple[Clause, ...]:
    clauses = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        m = _CLAUSE.match(part)
        if m is None or m.group("state") not in STATES:
            raise RuleError(f"cannot read {part!r}; allowed: {GRAMMAR}")
        after = timedelta(0)
        if m.group("after"):
            try:
                after = parse_duration(m.group("after"))
            except DurationError as err:
                raise RuleError(f"{part!r}: {err}") from None
        flavors = frozenset(
            f.strip() for f in re.split(r"\s+or\s+|,", m.group("flavors") or "") if f.strip()
        )
        clauses.append(Clause(STATES[m.group("state")], after, flavors))
    if not clauses:
        raise RuleError(f"empty rule; allowed: {GRAMMAR}")
    return tuple(clauses)


def decide(
    rules: Mapping[str, tuple[Clause, ...]], check: str, flavors: Iterable[str]
) -> Clause | None:
    """The clause of ``check``'s rule that applies to a workload with ``flavors``."""
    chosen = list(flavors)
    return next((c for c in rules.get(check, ()) if c.applies(chosen)), None)
