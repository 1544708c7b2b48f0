"""Each integration's kind is named only in its own modules (docs/architecture.md, "Adding an
integration"): its declaration (kqueue/api/integrations/<kind>.py) and its controller package
(kqueue/controller/integrations/<kind>/). Webhooks, RBAC, the configuration, ``kqueue simulate``
and the docs derive from the declaration, so a kind's name in any other module is a kind-specific
branch or table that should be a field of the declaration instead.

The kinds, their names and their own modules come from the registries, not from a list here: a
new integration is guarded as soon as it is declared. The scan is static (the parsed source of
every module under kqueue/); prose (comments, docstrings, help and description texts) may name
kinds as examples, so only identifiers and string literals equal to a name are counted.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import kqueue.api.integrations as api_integrations
import kqueue.controller.integrations as controller_integrations
from kqueue.api.integrations.declaration import Integration
from kqueue.api.integrations.registry import BY_FRAMEWORK, INTEGRATIONS
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import Framework

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kqueue"

# Kubernetes' own Pod and Job, not only integrations: every integration's pods are Pods (the pod
# webhook, owner references, gang scheduling, kwok's node stages, the simulator's bound pods),
# and Jobs are what a CronJob makes and what the Job controller's PodGroups belong to. Core
# modules name them by design, so only the kinds that live in their own packages are guarded.
CORE_FRAMEWORKS = {"batch/job", "pod"}

# Modules that name every kind on purpose, each with why.
ALLOWED = {
    "kqueue/api/integrations/registry.py": "collects every kind's declaration: the one list of kinds",
    "kqueue/controller/integrations/__init__.py": "imports every controller package so that each registers",
    "kqueue/localcluster/operators.py": "the recipes that build and start each kind's operator",
}


@dataclass
class Names:
    """What names one integration in code."""

    integration: Integration

    @cached_property
    def literals(self) -> frozenset[str]:
        i = self.integration
        return frozenset({i.kind, i.framework, i.api_version, *([i.operator] if i.operator else [])})

    @cached_property
    def group(self) -> str:
        return self.integration.api_version.rpartition("/")[0]

    @cached_property
    def lower_kind(self) -> str:
        return self.integration.kind.lower()

    def in_literal(self, text: str) -> bool:
        # A CRD group is dotted, so it is named wherever it stands (an apiVersion, a CRD file).
        return text in self.literals or ("." in self.group and self.group in text)

    def in_identifier(self, name: str) -> bool:
        return self.lower_kind in name.lower()


def guarded() -> list[Names]:
    assert set(BY_FRAMEWORK) >= CORE_FRAMEWORKS, "a core framework was renamed: update CORE_FRAMEWORKS"
    return [Names(i) for i in INTEGRATIONS if i.framework not in CORE_FRAMEWORKS]


def _relative(path: str | None) -> str:
    assert path is not None
    return Path(path).resolve().relative_to(ROOT).as_posix()


def _declarations(value: object) -> Iterator[Integration]:
    if isinstance(value, Integration):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from _declarations(item)


def _assigned(source: str) -> set[str]:
    """The names a module assigns at its top level (not the ones it imports)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def api_owners() -> dict[str, set[str]]:
    """framework -> the API modules that make its declaration (assign it, not import it)."""
    owners: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules(api_integrations.__path__, f"{api_integrations.__name__}."):
        module = importlib.import_module(info.name)
        path = _relative(module.__file__)
        if path in ALLOWED:
            continue
        for name in _assigned((ROOT / path).read_text(encoding="utf-8")):
            for declared in _declarations(getattr(module, name)):
                owners.setdefault(declared.framework, set()).add(path)
    return owners


def controller_owners() -> dict[str, set[str]]:
    """framework -> the controller packages whose ``__init__`` registers its Framework."""
    owners: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules(controller_integrations.__path__, f"{controller_integrations.__name__}."):
        if not info.ispkg:
            continue
        module = importlib.import_module(info.name)
        folder = Path(_relative(module.__file__)).parent.as_posix() + "/"
        for value in vars(module).values():
            if isinstance(value, Framework):
                owners.setdefault(value.name, set()).add(folder)
    return owners


def own_modules() -> dict[str, tuple[str, str]]:
    """framework -> (its API module, its controller package folder)."""
    api, controller = api_owners(), controller_owners()
    own: dict[str, tuple[str, str]] = {}
    for names in guarded():
        framework = names.integration.framework
        assert len(api.get(framework, ())) == 1, f"{framework}: declared in {sorted(api.get(framework, ()))}"
        assert len(controller.get(framework, ())) == 1, (
            f"{framework}: registered in {sorted(controller.get(framework, ()))}"
        )
        own[framework] = (next(iter(api[framework])), next(iter(controller[framework])))
    return own


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _identifiers(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.alias):
        yield node.asname or node.name
    elif isinstance(node, ast.ImportFrom) and node.module:
        yield node.module


def leaks(path: Path, source: str, names: list[Names], own: dict[str, tuple[str, str]]) -> list[str]:
    """``file:line: name (framework)`` for every name of a kind in a module that belongs to no
    integration. Integrations may name the kinds they are made of (a TrainJob runs a JobSet, an
    AppWrapper wraps other kinds, a LeaderWorkerSet's groups are StatefulSets): that is their own
    knowledge, kept in their own modules."""
    relative = path.relative_to(ROOT).as_posix()
    if relative in ALLOWED or any(relative == m or relative.startswith(p) for m, p in own.values()):
        return []
    # Every name counted below stands in the text as it is (lower-cased for identifiers): a
    # module that holds none of them needs no parsing.
    lowered = source.lower()
    if not any(token.lower() in lowered for kind in names for token in (*kind.literals, kind.group) if token):
        return []
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found.extend(
                    (line, f"{relative}:{line}: {node.value!r} ({kind.integration.framework})")
                    for kind in names
                    if kind.in_literal(node.value)
                )
            continue
        found.extend(
            (line, f"{relative}:{line}: {name} ({kind.integration.framework})")
            for name in _identifiers(node)
            for kind in names
            if kind.in_identifier(name)
        )
    return [text for _line, text in sorted(found)]


def test_every_guarded_kind_has_one_declaration_and_one_package() -> None:
    own = own_modules()
    assert set(own) == {i.framework for i in INTEGRATIONS} - CORE_FRAMEWORKS
    assert {f.name for f in registry.frameworks()} >= set(own)
    for reason in ALLOWED.values():
        assert reason


def test_kind_names_stay_in_their_own_modules() -> None:
    names, own = guarded(), own_modules()
    found = [
        leak
        for path in sorted(PACKAGE.rglob("*.py"))
        for leak in leaks(path, path.read_text(encoding="utf-8"), names, own)
    ]
    assert not found, "kind-specific names outside their integration's modules:\n" + "\n".join(found)


def test_the_scan_finds_a_kind_named_outside_its_modules() -> None:
    """The guard itself: a branch on a guarded kind, in a core module, is reported with its line;
    the same text in a comment or a docstring is not."""
    names, own = guarded(), own_modules()
    kind = names[0].integration
    source = (
        f'"""Mentions {kind.kind} in prose."""\n'
        f"# {kind.kind} in a comment\n"
        f"def check(obj):\n"
        f"    return obj.get('kind') == {kind.kind!r}\n"
        f"def for_{kind.kind.lower()}(obj):\n"
        f"    return obj\n"
    )
    found = leaks(PACKAGE / "controller" / "reconciler_probe.py", source, names, own)
    assert found == [
        f"kqueue/controller/reconciler_probe.py:4: {kind.kind!r} ({kind.framework})",
        f"kqueue/controller/reconciler_probe.py:5: for_{kind.kind.lower()} ({kind.framework})",
    ]
