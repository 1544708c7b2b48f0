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
            raise QuantityError(
                f"{value!r} is out of range: exponent must be within ±{_MAX_EXPONENT}"
            )
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


# Kubernetes keeps at most nano precision: finer values round up when parsed.
_NANO: Final = 10**9


# Quantity strings already parsed, to their nano-units; only valid strings are kept (a bad one
# raises each time), and the whole map is dropped when full (a bound, not an LRU: few distinct
# strings are in use at once).
_NANOS_OF: dict[str, int] = {}
_NANOS_OF_MAX: Final = 4096


class Quantity:
    """An exact Kubernetes quantity, independent of the resource it measures.

    Stored as an integer number of nano-units (Kubernetes' finest precision), so comparisons and
    sums are exact. ``units(resource)`` gives the integer kqueue computes with (milli-units for
    CPU, base units otherwise, rounded up); ``str()`` gives the canonical form. In pydantic models a
    Quantity field accepts a string, an integer, or a YAML/JSON number (read from its decimal text,
    as the API server does, so no binary floating point is involved) and serialises as the
    canonical string.
    """

    __slots__ = ("_nanos",)

    def __init__(self, value: str | int | Quantity) -> None:
        if isinstance(value, Quantity):
            self._nanos: int = value._nanos
            return
        if isinstance(value, str):
            # Every watch event and webhook call reads the same few strings ("1", "500m",
            # "4Gi"): exact parsing (regex and Fractions) is done once per string.
            nanos = _NANOS_OF.get(value)
            if nanos is None:
                nanos = _ceil(parse_exact(value) * _NANO)
                if len(_NANOS_OF) >= _NANOS_OF_MAX:
                    _NANOS_OF.clear()
                _NANOS_OF[value] = nanos
            self._nanos = nanos
            return
        self._nanos = _ceil(parse_exact(value) * _NANO)

    @classmethod
    def from_units(cls, amount: int, resource: str = "") -> Quantity:
        """The quantity of ``amount`` integer units of ``resource`` (milli-units for CPU)."""
        q = cls.__new__(cls)
        q._nanos = amount * (_NANO // 1000 if is_milli(resource) else _NANO)
        return q

    @classmethod
    def from_nanos(cls, nanos: int) -> Quantity:
        """The quantity of ``nanos`` nano-units (10^-9) of the base unit."""
        q = cls.__new__(cls)
        q._nanos = nanos
        return q

    @property
    def exact(self) -> Fraction:
        """The exact value in base units."""
        return Fraction(self._nanos, _NANO)

    @property
    def nanos(self) -> int:
        return self._nanos

    def units(self, resource: str = "") -> int:
        """Integer units of ``resource``, rounded up like ``parse_quantity``."""
        unit = _NANO // 1000 if is_milli(resource) else _NANO
        return -((-self._nanos) // unit)

    def is_negative(self) -> bool:
        return self._nanos < 0

    def __str__(self) -> str:
        nanos = self._nanos
        if nanos % _NANO == 0:
            return _format_base(nanos // _NANO)
        for suffix, factor in (("m", 10**6), ("u", 10**3)):
            if nanos % factor == 0:
                return f"{nanos // factor}{suffix}"
        return f"{nanos}n"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._nanos == other._nanos
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self._nanos < other._nanos

    def __le__(self, other: Quantity) -> bool:
        return self._nanos <= other._nanos

    def __gt__(self, other: Quantity) -> bool:
        return self._nanos > other._nanos

    def __ge__(self, other: Quantity) -> bool:
        return self._nanos >= other._nanos

    def __add__(self, other: Quantity) -> Quantity:
        q = Quantity.__new__(Quantity)
        q._nanos = self._nanos + other._nanos
        return q

    def __sub__(self, other: Quantity) -> Quantity:
        q = Quantity.__new__(Quantity)
        q._nanos = self._nanos - other._nanos
        return q

    def __mul__(self, factor: int) -> Quantity:
        q = Quantity.__new__(Quantity)
        q._nanos = self._nanos * factor
        return q

    __rmul__ = __mul__

    @classmethod
    def coerce(cls, value: object) -> Quantity:
        """Read a manifest value: a Quantity, a string, an integer or a JSON/YAML number."""
        if isinstance(value, Quantity):
            return value
        if isinstance(value, bool):
            raise QuantityError(f"{value!r} is not a quantity; expected {ALLOWED_FORMS}")
        if isinstance(value, str | int):
            return cls(value)
        if isinstance(value, float):
            # A YAML/JSON number like 0.5: read its shortest decimal text, exactly as the API
            # server reads the number literal; the float's binary value is never computed with.
            text = repr(value)
            if text in ("nan", "inf", "-inf"):
                raise QuantityError(f"{value!r} is not a quantity; expected {ALLOWED_FORMS}")
            return cls(text)
        raise QuantityError(f"{value!r} is not a quantity; expected {ALLOWED_FORMS}")
