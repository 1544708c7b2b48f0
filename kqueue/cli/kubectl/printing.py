"""Output as kubectl prints it: aligned columns with upper-case headers, ages, yaml and json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import yaml

from kqueue.api.v1alpha1 import parse_time

# kubectl's tabwriter: cells padded to the widest in their column, then three spaces.
_PADDING = 3


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, no_headers: bool = False
) -> str:
    """Rows under headers, columns aligned; the last column is not padded (as kubectl)."""
    lines: list[Sequence[str]] = list(rows) if no_headers else [list(headers), *rows]
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for line in lines:
        cells = [
            cell if i == len(line) - 1 else cell.ljust(widths[i] + _PADDING)
            for i, cell in enumerate(line)
        ]
        out.append("".join(cells).rstrip())
    return "\n".join(out)


def human_duration(d: timedelta) -> str:
    """An age as kubectl prints it (apimachinery's ``duration.HumanDuration``)."""
    seconds = int(d.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def age(obj: dict[str, Any], now: datetime) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    return human_duration(now - parse_time(str(created)))


def as_list(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``kubectl get -o yaml`` of several objects: a v1 List."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}}


def dump(obj: Any, output: str) -> str:
    if output == "json":
        return json.dumps(obj, indent=4)
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False).rstrip("\n")
