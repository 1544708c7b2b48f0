"""The part of DRA's CEL device selectors that counter quota needs (docs/dra.md).

Kueue matches a counter source's ``deviceSelector``, the DeviceClass's selectors and the
request's selectors against the devices drivers publish (``pkg/dra/counters.go``), with the
Kubernetes CEL library. kqueue has no CEL runtime; it evaluates the expressions these
selectors are written with:

* ``device.driver``, ``device.attributes["domain"].name`` (also ``["name"]``),
  ``device.capacity["domain"].name`` (a quantity, compared with ``.compareTo(quantity("20Gi"))``
  or with ``==`` against another quantity);
* string, integer and boolean literals; ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``;
  ``&&``, ``||``, ``!`` and parentheses.

Anything else raises :class:`CelError` naming the expression, so a selector kqueue cannot read
makes the workload ``Misconfigured`` rather than being guessed. A missing attribute or capacity
is an evaluation error, as in Kubernetes ("no such key").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kqueue.api.quantity import QuantityError, parse_exact

__all__ = ["CelError", "Quantity", "device_matches", "device_view"]


class CelError(ValueError):
    """An expression kqueue cannot evaluate, or a device it fails on."""


@dataclass(frozen=True, order=True)
class Quantity:
    """A ``resource.Quantity`` value in CEL (exact)."""

    value: Fraction

    def compare_to(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<int>\d+)
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>!().\[\],])
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)


def _tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = expr.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise CelError(f"CEL expression {expr!r}: cannot read it at offset {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the subset above, evaluating as it goes (expressions are short)."""

    def __init__(self, expr: str, device: Mapping[str, Any]) -> None:
        self.expr = expr
        self.toks = _tokens(expr)
        self.i = 0
        self.device = device

    def fail(self, what: str) -> CelError:
        return CelError(f"CEL expression {self.expr!r}: {what}")

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise self.fail("ends early")
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise self.fail(f"expected {want!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def run(self) -> Any:
        value = self.or_()
        if self.i != len(self.toks):
            raise self.fail(f"unexpected {self.toks[self.i][1]!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            value = _bool(self, value) or _bool(self, right)
        return value

    def and_(self) -> Any:
        value = self.unary()
        while self.peek() == "&&":
            self.take()
            right = self.unary()
            value = _bool(self, value) and _bool(self, right)
        return value

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not _bool(self, self.unary())
        return self.compare()

    def compare(self) -> Any:
        left = self.postfix()
        op = self.peek()
        if op not in ("==", "!=", "<", "<=", ">", ">="):
            return left
        self.take()
        right = self.postfix()
        if type(left) is not type(right):
            raise self.fail(f"cannot compare {left!r} with {right!r}")
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        if isinstance(left, bool):
            raise self.fail(f"{op} does not apply to booleans")
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]

    def postfix(self) -> Any:
        value = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                kind, name = self.take()
                if kind != "name":
                    raise self.fail(f"expected a field name, found {name!r}")
                if name == "compareTo" and isinstance(value, Quantity):
                    self.take("(")
                    other = self.or_()
                    self.take(")")
                    if not isinstance(other, Quantity):
                        raise self.fail("compareTo takes a quantity")
                    value = value.compare_to(other)
                elif self.peek() == "(":
                    raise self.fail(f"{name}() is not supported by kqueue (see docs/dra.md)")
                else:
                    value = self.field(value, name)
            else:
                key = self.or_()
                self.take("]")
                value = self.field(value, key)
        return value

    def field(self, value: Any, name: Any) -> Any:
        if not isinstance(value, Mapping):
            raise self.fail(f"{name!r} is looked up on a {type(value).__name__}")
        if isinstance(value, _Domains) and name not in value:
            return {}  # as in Kubernetes: a domain the device has nothing in is empty
        if name not in value:
            raise self.fail(f"no such key: {name}")
        return value[name]

    def primary(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return _unquote(text)
        if kind == "int":
            return int(text)
        if text == "(":
            value = self.or_()
            self.take(")")
            return value
        if kind == "name":
            if text in ("true", "false"):
                return text == "true"
            if text == "device":
                return self.device
            if text == "quantity" and self.peek() == "(":
                self.take("(")
                arg = self.or_()
                self.take(")")
                if not isinstance(arg, str):
                    raise self.fail("quantity() takes a string")
                try:
                    return Quantity(parse_exact(arg))
                except QuantityError as e:
                    raise self.fail(f"quantity({arg!r}): {e}") from None
        raise self.fail(f"{text!r} is not supported by kqueue (see docs/dra.md)")


def _bool(p: _Parser, value: Any) -> bool:
    if not isinstance(value, bool):
        raise p.fail(f"{value!r} is not a boolean")
    return value


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _attribute_value(attr: Any) -> Any:
    if isinstance(attr, Mapping):
        for k in ("string", "int", "bool", "version"):
            if k in attr:
                return attr[k]
    return attr


class _Domains(dict[str, dict[str, Any]]):
    """``device.attributes`` / ``device.capacity``: any domain can be looked up."""


def _by_domain(entries: Mapping[str, Any], driver: str, value: Any) -> _Domains:
    """A ResourceSlice's ``attributes`` / ``capacity`` keyed as CEL sees them: by domain, then
    name; a name without a domain is in the driver's."""
    out = _Domains()
    for qualified, v in entries.items():
        domain, _, name = str(qualified).rpartition("/")
        out.setdefault(domain or driver, {})[name] = value(v)
    return out


def _capacity_value(cap: Any) -> Quantity:
    raw = cap.get("value") if isinstance(cap, Mapping) else cap
    return Quantity(parse_exact(raw if isinstance(raw, int) else str(raw)))


def device_view(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceSlice device as CEL's ``device`` variable."""
    return {
        "driver": driver,
        "attributes": _by_domain(device.get("attributes") or {}, driver, _attribute_value),
        "capacity": _by_domain(device.get("capacity") or {}, driver, _capacity_value),
    }


def device_matches(expr: str, device: Mapping[str, Any]) -> bool:
    """Whether ``expr`` holds for ``device`` (a :func:`device_view`)."""
    try:
        parser = _Parser(expr, device)
        return _bool(parser, parser.run())
    except QuantityError as e:
        raise CelError(f"CEL expression {expr!r}: {e}") from None
