"""The ``simulate.kqueue.io/`` annotations: what happens to a workload in simulated time.

They are read from the object the workload comes from (a Workload, Job or Pod; for a pod group,
the first pod carrying them). Times are offsets from the start of the simulation, except the run
time, which counts from each admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from kqueue.api.durations import DurationError, format_duration, parse_duration

PREFIX: Final = "simulate.kqueue.io/"
# When the workload is created (default: at the start).
ARRIVAL: Final = PREFIX + "arrival"
# How long it runs once admitted; then it finishes (Succeeded) and frees its quota. Default:
# it runs until the end of the simulation. A preempted workload starts over when re-admitted.
RUN_TIME: Final = PREFIX + "run-time"
# Elastic Jobs: "60s=4,120s=2" sets parallelism to 4 at 60s and to 2 at 120s.
SCALE: Final = PREFIX + "scale"
# When the workload (or its Job/Pod) is deleted; held quota is freed.
DELETE: Final = PREFIX + "delete"
# When the workload is deactivated (spec.active: false); held quota is freed by eviction.
DEACTIVATE: Final = PREFIX + "deactivate"
# The class a workload is reported under (generators set it; per-class admission times).
CLASS_LABEL: Final = PREFIX + "class"

KNOWN: Final = frozenset({ARRIVAL, RUN_TIME, SCALE, DELETE, DEACTIVATE})


class AnnotationError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.path = f"metadata.annotations[{key}]"
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Timing:
    arrival: timedelta = timedelta(0)
    run_time: timedelta | None = None
    scale: tuple[tuple[timedelta, int], ...] = ()
    delete: timedelta | None = None
    deactivate: timedelta | None = None


def _duration(annotations: Mapping[str, str], key: str) -> timedelta | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        return parse_duration(raw, allow_negative=False)
    except DurationError as err:
        raise AnnotationError(key, str(err)) from None


def _scale(raw: str) -> tuple[tuple[timedelta, int], ...]:
    steps: list[tuple[timedelta, int]] = []
    for part in raw.split(","):
        when, eq, count = part.strip().partition("=")
        if not eq:
            raise AnnotationError(SCALE, f"{part.strip()!r} is not OFFSET=COUNT (e.g. 60s=4)")
        try:
            at = parse_duration(when, allow_negative=False)
        except DurationError as err:
            raise AnnotationError(SCALE, str(err)) from None
        try:
            n = int(count)
        except ValueError:
            raise AnnotationError(SCALE, f"{count.strip()!r} is not a pod count") from None
        if n < 0:
            raise AnnotationError(SCALE, f"pod count {n} is negative")
        steps.append((at, n))
    steps.sort(key=lambda s: s[0])
    return tuple(steps)


def read_timing(annotations: Mapping[str, str]) -> Timing:
    """The simulation timing of an object; unknown ``simulate.kqueue.io/`` keys are errors."""
    for key in sorted(annotations):
        if key.startswith(PREFIX) and key not in KNOWN:
            raise AnnotationError(
                key, f"unknown simulation annotation; known: {', '.join(sorted(KNOWN))}"
            )
    scale = annotations.get(SCALE)
    return Timing(
        arrival=_duration(annotations, ARRIVAL) or timedelta(0),
        run_time=_duration(annotations, RUN_TIME),
        scale=_scale(scale) if scale is not None else (),
        delete=_duration(annotations, DELETE),
        deactivate=_duration(annotations, DEACTIVATE),
    )


def write_timing(t: Timing) -> dict[str, str]:
    """The annotations that describe ``t`` (for generated manifests)."""
    out: dict[str, str] = {}
    if t.arrival:
        out[ARRIVAL] = format_duration(t.arrival)
    if t.run_time is not None:
        out[RUN_TIME] = format_duration(t.run_time)
    if t.scale:
        out[SCALE] = ",".join(f"{format_duration(at)}={n}" for at, n in t.scale)
    if t.delete is not None:
        out[DELETE] = format_duration(t.delete)
    if t.deactivate is not None:
        out[DEACTIVATE] = format_duration(t.deactivate)
    return out
