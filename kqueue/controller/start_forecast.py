"""Predicted start times, kept fresh off the admission path (docs/contracts.md §6).

The engine's state is captured on the event loop (immutable values, engine/forecast/state.py:
pointer copies, no deep copy) and run forward in a worker thread
(:func:`kqueue.engine.forecast.forward.forecast`), with a time budget the thread checks between
simulated instants. Scheduling cycles go on meanwhile on the loop; the forecast only reads its
own rebuilt engine. Nothing is written to the API: the predictions are served by the visibility
API (``estimatedStartTime``) and compared with the actual admission for the
``start_prediction_error_seconds`` metric.

When: every ``predictedStart.interval``, and sooner (after ``SETTLE`` seconds, to take a burst
as one change) when something large happened: a workload holding quota finished or released it
(the frees a prediction hinges on), or ``LARGE_CHANGE`` other Workload events arrived.

The run-time history is fed from the Workload informer: every Workload seen finished (the
initial list included) adds its run to its LocalQueue's history once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final

from kqueue.api.config import PredictedStart
from kqueue.api.v1alpha1 import Workload
from kqueue.controller.clock import Now, utc_now
from kqueue.engine.engine import Engine
from kqueue.engine.forecast.forward import Forecast, Prediction, forecast
from kqueue.engine.forecast.history import RunTimeHistory
from kqueue.engine.forecast.state import capture
from kqueue.engine.types import WorkloadKey
from kqueue.visibility.estimates import record_finished

logger = logging.getLogger(__name__)

# Workload events (other than frees) that count as a large change.
LARGE_CHANGE: Final = 50
# Seconds between a large change and the recomputation it brings forward.
SETTLE: Final = 1.0


class StartForecaster:
    """The latest predictions, and the task that recomputes them."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        settings: PredictedStart,
        *,
        now: Now = utc_now,
        worker: Callable[[Callable[[], Forecast]], asyncio.Future[Forecast]] | None = None,
    ) -> None:
        self._engine = engine
        self.settings = settings
        self._now = now
        self.history = RunTimeHistory(half_life=settings.history_half_life)
        self._predictions: dict[WorkloadKey, Prediction] = {}
        self._changes = 0
        self._wake: asyncio.Event | None = None
        self._worker = worker
        # What the last recomputation did, for logs and tests.
        self.computed_at: datetime | None = None
        self.recomputations = 0
        self.cut_short = 0
        self.last_seconds = 0.0

    # -- what is served ----------------------------------------------------------------------

    def estimates(self) -> dict[WorkloadKey, datetime]:
        """Predicted start per pending workload, never before the current time (a prediction
        made a while ago for "now" still means "now")."""
        now = self._now()
        return {k: max(p.start, now) for k, p in self._predictions.items()}

    def prediction(self, key: WorkloadKey) -> Prediction | None:
        return self._predictions.get(key)

    # -- events ------------------------------------------------------------------------------

    def observe(self, old: Workload | None, new: Workload | None) -> None:
        """A Workload event (``new`` None: deleted): history, and whether to recompute soon."""
        large = False
        if new is not None and record_finished(self.history, new):
            large = True
        held = old is not None and old.status.admission is not None and not old.is_finished
        if held and (new is None or new.status.admission is None or new.is_finished):
            large = True
        self._changes += 1
        if large or self._changes >= LARGE_CHANGE:
            self._changes = 0
            if self._wake is not None:
                self._wake.set()

    def admitted(self, key: WorkloadKey, at: datetime) -> float | None:
        """Seconds the admission at ``at`` came after its prediction (negative: before); None
        when the workload had none. The prediction is used up."""
        p = self._predictions.pop(key, None)
        if p is None:
            return None
        return (at - p.start).total_seconds()

    # -- recomputation -----------------------------------------------------------------------

    async def recompute(self) -> Forecast:
        """One forecast: captured here, run in a worker thread within the budget."""
        state = capture(self._engine())
        history = self.history.copy()
        now = self._now()
        budget = self.settings.budget.total_seconds()
        started = time.monotonic()

        def stop() -> bool:
            return time.monotonic() - started > budget

        def run() -> Forecast:
            return forecast(state, now, history, stop=stop)

        result = await (self._worker(run) if self._worker is not None else asyncio.to_thread(run))
        self._predictions = dict(result.predictions)
        self.computed_at = now
        self.recomputations += 1
        self.last_seconds = time.monotonic() - started
        if not result.complete:
            self.cut_short += 1
        logger.debug(
            "predicted starts: %d of %d pending in %.3fs%s",
            len(result.predictions), result.considered, self.last_seconds,
            "" if result.complete else " (cut short)",
        )
        return result

    async def run(self) -> None:
        """Recompute every interval, and soon after a large change, until cancelled."""
        self._wake = asyncio.Event()
        interval = self.settings.interval.total_seconds()
        while True:
            try:
                await self.recompute()
            except Exception:  # a bad forecast must not stop admission or the next forecast
                logger.exception("predicted start times: recomputation failed")
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=interval)
            except TimeoutError:
                continue
            await asyncio.sleep(min(SETTLE, interval))
