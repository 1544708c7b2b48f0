"""Durations as Go's ``time.ParseDuration`` writes them (``90s``, ``1m30s``, ``200ms``, ``1.5h``).

Parsed exactly (no floats) into ``timedelta``; the simulator's clock has microsecond resolution,
so a duration that is not a whole number of microseconds is refused rather than rounded.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Final

# Microseconds per unit.
_UNITS: Final[dict[str, Fraction]] = {
    "ns": Fraction(1, 1000),
    "us": Fraction(1),
    "µs": Fraction(1),
    "μs": Fraction(1),
    "ms": Fraction(1000),
    "s": Fraction(1_000_000),
    "m": Fraction(60_000_000),
    "h": Fraction(3_600_000_000),
}
_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")

ALLOWED: Final = "a duration such as 30s, 1m30s, 200ms or 1.5h (units ns, us, ms, s, m, h)"


class DurationError(ValueError):
    pass


def parse_duration(text: str, *, allow_negative: bool = False) -> timedelta:
    """Parse a Go duration string; ``0`` alone is allowed, as in Go."""
    s = text.strip()
    sign = 1
    if s and s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return timedelta(0)
    if not s:
        raise DurationError(f"{text!r} is not a duration (allowed: {ALLOWED})")
    pos = 0
    micros = Fraction(0)
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise DurationError(f"{text!r} is not a duration (allowed: {ALLOWED})")
        micros += Fraction(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if micros.denominator != 1:
        raise DurationError(f"{text!r} is finer than the simulator's 1us resolution")
    if sign < 0 and not allow_negative and micros:
        raise DurationError(f"{text!r} is negative (allowed: {ALLOWED})")
    return timedelta(microseconds=sign * int(micros))


def format_duration(d: timedelta) -> str:
    """Go's ``Duration.String()`` for whole microseconds: ``1m30s``, ``200ms``, ``1.5s``."""
    micros = d // timedelta(microseconds=1)
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1000:
        return f"{sign}{micros}us"
    if micros < 1_000_000:
        if micros % 1000 == 0:
            return f"{sign}{micros // 1000}ms"
        return f"{sign}{_decimal(micros, 1000)}ms"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = _decimal(rest, 1_000_000)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{seconds}s"


def _decimal(amount: int, unit: int) -> str:
    whole, frac = divmod(amount, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
