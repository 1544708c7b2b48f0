"""Label selectors (metav1.LabelSelector) over plain label maps."""

from __future__ import annotations

from collections.abc import Mapping

from .types import LabelSelector, SelectorRequirement


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    return False


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """None selects nothing (Kueue's nil namespaceSelector); an empty selector selects all."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(r, labels) for r in selector.match_expressions)
