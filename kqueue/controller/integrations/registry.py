"""The registry of integrations: every managed kind registers its :class:`Framework` here.

Each kind declares itself once, in the API layer (kqueue.api.integrations.registry); its
controller package registers what the controller adds (reconcile and webhook specifics). The
manager wires the enabled ones; the webhook configurations, the chart's RBAC and framework
list, ``make run`` and docs/integrations.md are derived from the registered ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from kqueue.api.integrations.registry import BY_FRAMEWORK
from kqueue.controller.integrations.framework import Framework

_FRAMEWORKS: dict[str, Framework] = {}


class UnknownFramework(ValueError):
    """A configured framework name no integration registered."""


def register(framework: Framework) -> Framework:
    """Register a kind's controller half; its declaration must be the one the API-level
    registry (kqueue.api.integrations.registry) lists, so no layer has its own list of kinds."""
    if BY_FRAMEWORK.get(framework.name) is not framework.declares:
        raise ValueError(
            f"integration {framework.name!r} is not declared in kqueue.api.integrations.registry"
        )
    adapter = framework.multikueue
    if adapter is not None and (adapter.api_version, adapter.kind) != (
        framework.api_version, framework.kind
    ):
        raise ValueError(
            f"integration {framework.name!r}: its MultiKueue adapter is for {adapter.kind} "
            f"({adapter.api_version}), not {framework.kind} ({framework.api_version})"
        )
    if framework.name in _FRAMEWORKS and _FRAMEWORKS[framework.name] is not framework:
        raise ValueError(f"integration {framework.name!r} is registered twice")
    _FRAMEWORKS[framework.name] = framework
    return framework


def frameworks() -> list[Framework]:
    """Every registered integration, in registration order."""
    return list(_FRAMEWORKS.values())


def get(name: str) -> Framework:
    try:
        return _FRAMEWORKS[name]
    except KeyError:
        raise UnknownFramework(
            f"integrations.frameworks: unknown framework {name!r}; known: "
            + ", ".join(sorted(_FRAMEWORKS))
        ) from None


def enabled(names: Iterable[str]) -> list[Framework]:
    """The configured frameworks, in registration order."""
    wanted = set(names)
    for name in wanted:
        get(name)
    return [f for f in _FRAMEWORKS.values() if f.name in wanted]
