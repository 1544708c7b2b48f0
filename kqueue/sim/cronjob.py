"""A CronJob (batch/v1) in ``kqueue simulate``: its schedule expanded into the Jobs the CronJob
controller would create over the simulated window.

kqueue queues a CronJob's Jobs through the Job integration (a Job made from ``spec.jobTemplate``
carries its labels); a CronJob itself has no Workload. The simulator creates, for every time the
schedule fires in ``[start, start + window)``, the Job the controller would: named
``<cronjob>-<minutes since the epoch>``, controlled by the CronJob, with the job template's
labels, annotations and spec, arriving at that time (``simulate.kqueue.io/arrival``). A
suspended CronJob creates none. ``concurrencyPolicy`` is read as ``Allow`` (every scheduled Job
is created; the simulator cannot know when an earlier one would have finished before placing
it), which ``warnings`` says for ``Forbid`` and ``Replace``.

The schedule is the five-field cron syntax the controller parses (robfig/cron's standard
parser): minute, hour, day of month, month, day of week; ``*``, ``a-b``, ``/step``, lists,
month and day names, the ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
(``@midnight``) and ``@hourly`` descriptors, and ``spec.timeZone`` (an IANA name). As in cron,
when both day fields are restricted a day matching either is a match.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kqueue.api.durations import format_duration
from kqueue.api.integrations import IntegrationError
from kqueue.sim.annotations import ARRIVAL

API_VERSION: Final = "batch/v1"
KIND: Final = "CronJob"
# Expanded when ``kqueue simulate`` is given no --until.
DEFAULT_WINDOW: Final = timedelta(hours=1)
# More Jobs than this from one CronJob is a mistake in the schedule or the window.
MAX_JOBS: Final = 1000

_DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS: Final = {m: i for i, m in enumerate(
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1)}
_DAYS: Final = {d: i for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
# (name, lowest, highest, names)
_FIELDS: Final[tuple[tuple[str, int, int, Mapping[str, int]], ...]] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # Both day fields restricted: a day matching either one fires (cron's rule).
    either_day: bool

    def fires(self, t: datetime) -> bool:
        if t.minute not in self.minutes or t.hour not in self.hours or t.month not in self.months:
            return False
        day, weekday = t.day in self.days, (t.isoweekday() % 7) in self.weekdays
        return (day or weekday) if self.either_day else (day and weekday)


def _value(text: str, names: Mapping[str, int], what: str) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ValueError(f"{what}: {text!r} is not a number" + (f" or a name ({', '.join(names)})" if names else ""))
    return int(text)


def _field(text: str, what: str, low: int, high: int, names: Mapping[str, int]) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = _value(step_text, {}, what) if step_text else 1
        if step < 1:
            raise ValueError(f"{what}: step must be at least 1 in {part!r}")
        if rng in ("*", "?"):
            first, last = low, high
        elif "-" in rng:
            a, _, b = rng.partition("-")
            first, last = _value(a, names, what), _value(b, names, what)
        else:
            first = _value(rng, names, what)
            last = high if step_text else first
        if not (low <= first <= last <= high):
            raise ValueError(f"{what}: {part!r} is outside {low}-{high}")
        out.update(range(first, last + 1, step))
    return frozenset(out)


def parse_schedule(text: str) -> Schedule:
    """The schedule ``text`` means; ValueError naming the bad field."""
    fields = _DESCRIPTORS.get(text.strip().lower(), text).split()
    if len(fields) != 5:
        raise ValueError(f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    minutes, hours, days, months, weekdays = (
        _field(f, what, low, high, names) for f, (what, low, high, names) in zip(fields, _FIELDS, strict=True)
    )
    weekdays = frozenset(d % 7 for d in weekdays)  # 7 is Sunday too
    restricted = not fields[2].startswith(("*", "?")) and not fields[4].startswith(("*", "?"))
    return Schedule(minutes, hours, days, months, weekdays, either_day=restricted)


def fire_times(schedule: Schedule, start: datetime, end: datetime, zone: ZoneInfo) -> list[datetime]:
    """Every minute in ``[start, end)`` at which the schedule fires (in ``zone``), in UTC."""
    t = start.astimezone(zone).replace(second=0, microsecond=0)
    if t < start:
        t += timedelta(minutes=1)
    out: list[datetime] = []
    while t < end and len(out) <= MAX_JOBS:
        if schedule.fires(t):
            out.append(t.astimezone(UTC))
        t = (t.astimezone(UTC) + timedelta(minutes=1)).astimezone(zone)
    return out


def _spec(cronjob: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = cronjob.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def jobs_of(cronjob: Mapping[str, Any], start: datetime, window: timedelta) -> tuple[list[dict[str, Any]], list[str]]:
    """The Jobs the CronJob creates in ``[start, start + window)``, and warnings; raises
    IntegrationError naming the CronJob's field."""
    spec = _spec(cronjob)
    meta = cronjob.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), meta.get("namespace")
    try:
        schedule = parse_schedule(str(spec.get("schedule") or ""))
    except ValueError as err:
        raise IntegrationError("spec.schedule", f"{err} (in {spec.get('schedule')!r})") from None
    try:
        zone = ZoneInfo(str(spec.get("timeZone") or "UTC"))
    except (ZoneInfoNotFoundError, ValueError):
        raise IntegrationError("spec.timeZone", f"unknown time zone {spec.get('timeZone')!r}") from None
    template = spec.get("jobTemplate")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise IntegrationError("spec.jobTemplate.spec", "required")
    warnings: list[str] = []
    if spec.get("suspend"):
        return [], warnings
    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy != "Allow":
        warnings.append(f"spec.concurrencyPolicy {policy} is simulated as Allow (every scheduled Job is created)")
    times = fire_times(schedule, start, start + window, zone)
    if len(times) > MAX_JOBS:
        raise IntegrationError(
            "spec.schedule",
            f"fires more than {MAX_JOBS} times in the simulated {format_duration(window)}; give a shorter --until",
        )
    jobs = []
    template_meta = template.get("metadata") or {}
    for at in times:
        job_meta: dict[str, Any] = {
            # The CronJob controller's name: the scheduled time in minutes since the epoch.
            "name": f"{name}-{int(at.timestamp()) // 60}",
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": {**(template_meta.get("annotations") or {}), ARRIVAL: format_duration(at - start)},
            "ownerReferences": [
                {"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": str(meta.get("uid") or ""),
                 "controller": True, "blockOwnerDeletion": True}
            ],
        }
        if namespace:
            job_meta["namespace"] = namespace
        jobs.append(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": copy.deepcopy(dict(template["spec"]))}
        )
    return jobs, warnings
