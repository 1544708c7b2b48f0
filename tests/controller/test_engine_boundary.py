"""The controller uses the engine through ``Engine``'s public methods only.

The engine's parts (its cache, queues, readiness tracker, barrier, preemptor) are its own to
change; the controller reading them directly would break on every such change. Every attribute
the controller takes from something named ``engine`` (``engine``, ``self.engine``,
``self._engine()``, ``ctx.engine()`` ...) must be a public method or property of ``Engine``.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from kqueue.engine.engine import Engine

CONTROLLER = Path(__file__).resolve().parents[2] / "kqueue" / "controller"
ENGINE_EXPR = re.compile(r"(^|\.)_?engine(\(\))?$")

PUBLIC = frozenset(
    name
    for name, member in inspect.getmembers(Engine)
    if not name.startswith("_") and (callable(member) or isinstance(member, property))
)


def engine_attributes(source: str) -> list[tuple[int, str, str]]:
    """(line, the engine expression, the attribute taken from it) for every such access."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            base = ast.unparse(node.value)
            if ENGINE_EXPR.search(base):
                found.append((node.lineno, base, node.attr))
    return found


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        pytest.param("engine.cache.evicting.discard(k)", ["cache"], id="a-part-by-name"),
        pytest.param("self._engine().queues.pending", ["queues"], id="a-part-through-a-getter"),
        pytest.param("ctx.engine().readiness.config", ["readiness"], id="through-a-context"),
        pytest.param("self.engine.forget(k)", [], id="a-public-method"),
        pytest.param("engine.pods_ready_config", [], id="a-public-property"),
        pytest.param("self._engine = engine", [], id="not-an-attribute-of-the-engine"),
    ],
)
def test_the_check_finds_what_it_should(source: str, flagged: list[str]) -> None:
    got = [attr for _, _, attr in engine_attributes(source) if attr not in PUBLIC]
    assert got == flagged


def test_the_controller_uses_no_engine_internals() -> None:
    offenders = []
    for path in sorted(CONTROLLER.rglob("*.py")):
        for line, base, attr in engine_attributes(path.read_text()):
            if attr not in PUBLIC:
                offenders.append(f"{path.relative_to(CONTROLLER.parent.parent)}:{line}: {base}.{attr}")
    assert not offenders, "use (or add) an Engine method instead of:\n" + "\n".join(offenders)
