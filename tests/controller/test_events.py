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
