"""Exact Kubernetes quantities.

Quantities are parsed into integers and never into floats: CPU-like resources in milli-units
(``"500m"`` -> 500, ``"2"`` -> 2000), everything else in base units (``"2Gi"`` -> 2147483648).
Like Kubernetes' ``Quantity.Value()``/``MilliValue()``, a value finer than the unit is rounded up,
so a request is never under-counted.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

# Resources measured in milli-units. Kubernetes only ever uses milli precision for CPU; every
# other resource (memory, storage, GPUs, pods) is counted in whole base units.
MILLI_RESOURCES: Final[frozenset[str]] = frozenset({"cpu"})

_BINARY: Final[dict[str, int]] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_DECIMAL: Final[dict[str, Fraction]] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

# <sign><digits>[.<digits>] then a binary suffix, a decimal suffix, or an exponent (e/E<int>).
_QUANTITY_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)

# Kubernetes rejects quantities whose magnitude does not fit in its internal representation;
# a generous bound keeps a typo like "1e999999" from allocating huge integers.
_MAX_EXPONENT: Final = 30

ALLOWED_FORMS: Final = (
    "a number with an optional suffix: m, k, M, G, T, P, E (decimal), Ki, Mi, Gi, Ti, Pi, Ei "
    "(binary) or an exponent such as 1e3"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def is_milli(resource: str) -> bool:
    """Whether ``resource`` is counted in milli-units."""
    return resource in MILLI_RESOURCES


def parse_exact(value: str | int) -> Fraction:
    """Parse a quantity into an exact rational number of base units."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity; expected {ALLOWED_FORMS}")
    if isinstance(value, int):
        return Fraction(value)
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity; expected {ALLOWED_FORMS}")
    m = _QUANTITY_RE.match(value.strip())
    if m is None or value.strip() == "":
        raise QuantityError(f"{value!r} is not a quantity; expected {ALLOWED_FORMS}")
    number = Fraction(m.group("num"))
    if m.group("sign") == "-":
        number = -number
    if m.group("bin"):
        return number * _BINARY[m.group("bin")]
    if m.group("exp"):
        exponent = int(m.group("exp")[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"{value!r} is out of range: exponent must be within ±{_MAX_EXPONENT}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[m.group("dec") or ""]


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def parse_quantity(value: str | int, resource: str = "") -> int:
    """Parse ``value`` into exact integer units of ``resource``.

    CPU-like resources come back in milli-units, others in base units; a finer value rounds up.
    """
    exact = parse_exact(value)
    if is_milli(resource):
        exact *= 1000
    return _ceil(exact)


def format_quantity(amount: int, resource: str = "") -> str:
    """Print integer units of ``resource`` back in canonical Kubernetes form.

    ``format_quantity(500, "cpu") == "500m"``, ``format_quantity(2000, "cpu") == "2"``,
    ``format_quantity(2**31, "memory") == "2Gi"``. ``parse_quantity`` of the result gives
    ``amount`` back exactly.
    """
    if is_milli(resource):
        if amount % 1000 == 0:
            return _format_base(amount // 1000)
        return f"{amount}m"
    return _format_base(amount)


def _format_base(amount: int) -> str:
    if amount == 0:
        return "0"
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    # Binary suffixes first: memory is overwhelmingly written in Ki/Mi/Gi.
    for suffix, factor in reversed(_BINARY.items()):
        if magnitude % factor == 0:
            return f"{sign}{magnitude // factor}{suffix}"
    for suffix in ("E", "P", "T", "G", "M", "k"):
        factor = int(_DECIMAL[suffix])
        if magnitude % factor == 0:
            return f"{sign}{magnitude // factor}{suffix}"
    return f"{sign}{magnitude}"


def canonical(value: str | int, resource: str = "") -> str:
    """The canonical form of a quantity string (rounded up to the resource's unit)."""
    return format_quantity(parse_quantity(value, resource), resource)
