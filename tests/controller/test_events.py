"""Event recording under overload: dropped events are counted and warned about sparingly."""

from __future__ import annotations

import logging
from typing import cast

import pytest

from kqueue.controller import events as events_module
from kqueue.controller.events import EventRecorder
from kqueue.controller.kube import Kube

OBJ = {
    "apiVersion": "kqueue.io/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "w", "namespace": "team", "uid": "u"},
}


async def test_a_full_queue_drops_events_with_one_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_module, "_MAX_QUEUED", 3)
    recorder = EventRecorder(cast(Kube, None), instance="test")
    with caplog.at_level(logging.WARNING, logger="kqueue.controller.events"):
        for i in range(50):
            recorder.record(OBJ, "Normal", "Admitted", f"message {i}")
    assert recorder.dropped == 47
    warnings = [r.getMessage() for r in caplog.records if "event queue full" in r.getMessage()]
    assert len(warnings) == 1
    assert "dropped 1 event(s)" in warnings[0]


class _RefusingKube:
    """The API server's answer to an Event created in a namespace being deleted."""

    def __init__(self, body: dict[str, object]) -> None:
        self.body = body
        self.creates = 0

    async def create(self, *args: object, **kwargs: object) -> None:
        from kqueue.controller.kube import KubeError

        self.creates += 1
        raise KubeError.of("create events", 403, self.body)


TERMINATING = {
    "reason": "Forbidden",
    "message": 'events "w.1" is forbidden: unable to create new content in namespace team '
    "because it is being terminated",
    "details": {"name": "w.1", "kind": "events", "causes": [
        {"reason": "NamespaceTerminating", "message": "namespace team is being terminated",
         "field": "metadata.namespace"}]},
}
RBAC = {
    "reason": "Forbidden",
    "message": 'events is forbidden: User "system:serviceaccount:kqueue:kqueue" cannot create '
    'resource "events" in API group "" in the namespace "team"',
}


@pytest.mark.parametrize(
    ("body", "logged"),
    [pytest.param(TERMINATING, False, id="namespace-terminating"),
     pytest.param(RBAC, True, id="rbac-refusal")],
)
async def test_an_event_refused_because_its_namespace_goes_is_not_reported(
    caplog: pytest.LogCaptureFixture, body: dict[str, object], logged: bool
) -> None:
    """A namespace being deleted refuses new Events (403, NamespaceTerminating): expected, so
    not logged at INFO where an operator (and the RBAC check of the chart) reads 403s; an RBAC
    refusal still is."""
    import asyncio

    kube = _RefusingKube(body)
    recorder = EventRecorder(cast(Kube, kube), instance="test")
    recorder.record(OBJ, "Normal", "Pending", "waiting")
    with caplog.at_level(logging.INFO, logger="kqueue.controller.events"):
        runner = asyncio.create_task(recorder.run())
        for _ in range(100):
            if kube.creates:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        runner.cancel()
    assert kube.creates == 1
    infos = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert bool(infos) is logged, [r.getMessage() for r in infos]
