"""Small stand-ins the controller's unit tests share besides the fake API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kqueue.api.v1alpha1 import parse_object
from kqueue.controller.events import EventRecorder, ObjectRef

Obj = dict[str, Any]
M = TypeVar("M")


class Events(EventRecorder):
    """Records events instead of posting them (an Event is a hint; tests read the reasons)."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []

    def record(self, obj: Obj | ObjectRef, type_: Any, reason: str, message: str) -> None:
        name = obj.name if isinstance(obj, ObjectRef) else obj["metadata"]["name"]
        self.recorded.append((name, type_, reason, message))

    def reasons(self, name: str) -> list[str]:
        return [r for n, _, r, _ in self.recorded if n == name]


def model(cls: type[M]) -> Callable[[Obj], M]:
    """An informer converter to ``cls``, as the manager's (objects in the API are valid)."""

    def convert(doc: Obj) -> M:
        out = parse_object(doc, validate=False)
        assert isinstance(out, cls)
        return out

    return convert


