"""Crash safety: ``kqueue run`` SIGKILLed at random points of a run with preemptions.

The controller is killed (no chance to clean up) and restarted while Jobs are being submitted,
admitted, preempted and finished. A watcher checks every Workload state the API server goes
through (not kqueue's memory): quota and cohort limits hold, no workload holds quota twice; at
the end every Job finished, no admitted workload's pod is gated and no Workload is orphaned.

CI default: 100 Jobs, 10 kills. ``KQUEUE_SOAK=1``: 500 Jobs, 12 kills.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from tests.controller_e2e.harness import Api
from tests.reliability.faults import (
    SOAK,
    InvariantWatcher,
    Replica,
    Scenario,
    api,
    converged,
    final_checks,
    kq,
    percentiles,
    record,
    running,
    wait_until,
)

# timing-bound: run on one worker with the machine to itself (hack/test-phases.sh)
pytestmark = [pytest.mark.cluster, pytest.mark.serial]
__all__ = ["api", "kq"]  # fixtures

JOBS = 500 if SOAK else 100
KILLS = 12 if SOAK else 10


@pytest.mark.timeout(1800 if SOAK else 420)
async def test_sigkill_at_random_points_keeps_quota_and_loses_nothing(
    api: Api, kq: Replica, namespace: str
) -> None:
    rng = random.Random(20261121)
    scenario = Scenario(api, namespace)
    await scenario.setup()
    watcher = InvariantWatcher(kq.cluster, namespace, scenario.queues)
    started = time.monotonic()
    restarts: list[float] = []
    async with running(watcher):
        submitting = asyncio.create_task(scenario.submit(JOBS, rng, rate=6.0 if SOAK else 4.0))
        kills = 0
        # Keep killing until the quota of kills is reached and every Job was submitted, so
        # kills land in submission, admission, preemption and completion alike.
        while kills < KILLS or not submitting.done():
            await asyncio.sleep(rng.uniform(1.0, 4.0))
            t0 = time.monotonic()
            await asyncio.to_thread(kq.restart, kill=True)
            restarts.append(time.monotonic() - t0)
            kills += 1
        await submitting
        submitted_at = time.monotonic()
        await wait_until(
            lambda: converged(api, namespace, scenario.jobs),
            within=900 if SOAK else 180,
            what="every Job Complete after the crashes",
        )
        converged_after = time.monotonic() - submitted_at
    watcher.assert_clean()
    await final_checks(api, namespace, scenario.jobs)
    assert watcher.admissions >= JOBS
    assert watcher.evictions > 0, "the run was meant to include preemptions"
    record(
        "crash",
        {
            "jobs": JOBS,
            "sigkills": kills,
            "admissions": watcher.admissions,
            "evictions": watcher.evictions,
            "watch_events_checked": watcher.events_seen,
            "restart_to_ready": percentiles(restarts),
            "converged_after_last_submit_s": round(converged_after, 1),
            "total_s": round(time.monotonic() - started, 1),
        },
    )
