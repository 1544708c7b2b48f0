"""Durations as Go writes them: one parser (``time.ParseDuration``) and one formatter
(``time.Duration.String()``), for the Configuration, the simulator's annotations and flags, and
every message that prints a duration.

Parsed exactly (no floats) into ``timedelta``, whose resolution is one microsecond: a duration
that is not a whole number of microseconds is refused rather than rounded. Printed as Go prints
it, so that what kqueue writes reads as what Kueue and kubectl write: ``1.5s``, ``1m30s``,
``1h0m0s``, ``200ms``, ``0s``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Final

# Units of Go's time.ParseDuration, in nanoseconds.
_UNIT_NS: Final[dict[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
# Go's time.Duration is an int64 of nanoseconds (about 292 years).
_MAX_NS: Final = 2**63 - 1

FORMS: Final = 'a duration such as "15s", "5m", "1h30m" or "1.5s" (units: h, m, s, ms, us, ns)'


class DurationError(ValueError):
    """A string that is not a Go duration (or not one allowed where it is used)."""


def parse_duration(text: str, *, allow_negative: bool = True) -> timedelta:
    """Parse a Go duration string exactly: ``parse_duration("1m30s") == timedelta(seconds=90)``.

    ``0`` alone is allowed, as in Go. A value finer than a microsecond is refused rather than
    rounded; so is a negative one unless ``allow_negative`` (Go allows a sign).
    """
    s = text.strip()
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return timedelta(0)
    if not s:
        raise DurationError(f"{text!r} is not {FORMS}")
    total_ns = Fraction(0)
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise DurationError(f"{text!r} is not {FORMS}")
        total_ns += Fraction(m.group(1)) * _UNIT_NS[m.group(2)]
        pos = m.end()
    if total_ns > _MAX_NS:
        raise DurationError(f"{text!r} is out of range (at most 2562047h47m16.854775807s)")
    micros = total_ns / 1000
    if micros.denominator != 1:
        raise DurationError(f"{text!r} is finer than one microsecond")
    if sign < 0 and not allow_negative and micros:
        raise DurationError(f"{text!r} is negative; allowed: {FORMS}, at least 0")
    return timedelta(microseconds=sign * int(micros))


def format_duration(d: timedelta) -> str:
    """Go's ``Duration.String()`` (for whole microseconds): ``1h0m0s``, ``1m30s``, ``1.5s``,
    ``200ms``, ``1.5ms``, ``250us``, ``0s``."""
    micros = d // timedelta(microseconds=1)
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1000:
        return f"{sign}{micros}us"
    if micros < 1_000_000:
        return f"{sign}{_decimal(micros, 1000)}ms"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{_decimal(rest, 1_000_000)}s"


def _decimal(amount: int, unit: int) -> str:
    """``amount / unit`` in decimal, without trailing zeros (``unit`` a power of ten)."""
    whole, frac = divmod(amount, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
