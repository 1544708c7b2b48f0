"""The manager's writes on its workers (remote_writes.py): timed from the workers' webhook
deadline, a create not answered or answered AlreadyExists waited for rather than sent again, a
per-worker exponential backoff, and a slow worker that holds up neither the sync nor the other
workers. Against in-process API servers (tests/controller/fake_apiserver.py), the workers read
through the shared stub (tests/controller/multikueue_workers.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kqueue.api.config import LabelSelector
from kqueue.api.v1alpha1 import AdmissionCheckState
from kqueue.controller.admission_checks.multikueue import controller as mkcontroller
from kqueue.controller.admission_checks.multikueue.controller import (
    MultiKueueController,
    remote_workload,
)
from kqueue.controller.admission_checks.multikueue.remote_writes import (
    REMOTE_WRITE_TIMEOUT_SECONDS,
    RemoteWrites,
    WorkerBackoff,
)
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import JOBS, WORKLOADS
from kqueue.controller.webhook_server.server import WEBHOOK_TIMEOUT_SECONDS
from kqueue.controller.webhooks.config import webhook_configurations
from tests.controller import test_multikueue_dispatch as dispatch
from tests.controller.fake_apiserver import FakeCluster, eventually
from tests.controller.multikueue_workers import ReachableWorkers
from tests.controller.test_multikueue_dispatch import (
    NOW,
    _admitted_status,
    _controller,
    _Events,
    _read,
    _setup,
)

# The fixtures: a manager and two workers, in-process.
manager, w1, w2 = dispatch.manager, dispatch.w1, dispatch.w2


def _pending() -> AdmissionCheckState:
    return AdmissionCheckState(name="mk", state="Pending", message="", last_transition_time=NOW)


def _mkc(manager: FakeCluster, workers: dict[str, Kube]) -> MultiKueueController:
    return _controller(manager, workers, Metrics(), _Events())


def _posts(worker: FakeCluster) -> int:
    return len(worker.server.requests_to("POST", WORKLOADS))


# -- the timeout -----------------------------------------------------------------------------


def test_a_write_outlasts_the_workers_webhook_deadline() -> None:
    """A create on a worker goes through the worker kqueue's webhooks, each allowed
    ``timeoutSeconds`` by its API server: the manager waits longer than two of them in series,
    so that it does not give up on creates the worker completes (docs/benchmarks.md section 12:
    1,098 such at 5 s)."""
    mutating, validating = webhook_configurations(
        namespace_selector=LabelSelector(), base_url="https://127.0.0.1:9443"
    )
    deadlines = {h["timeoutSeconds"] for h in [*mutating["webhooks"], *validating["webhooks"]]}
    assert deadlines == {WEBHOOK_TIMEOUT_SECONDS}
    assert REMOTE_WRITE_TIMEOUT_SECONDS > 2 * WEBHOOK_TIMEOUT_SECONDS


async def test_the_copy_is_sent_with_the_write_timeout(
    manager: FakeCluster, w1: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy's create carries the write timeout, not the client's (read) timeout: a worker
    slower than the read timeout but within the write one makes the copy and says so."""
    monkeypatch.setattr(mkcontroller, "REMOTE_WRITE_TIMEOUT_SECONDS", 1.0)
    w1.server.delay["POST"] = 0.3
    slow_reader = Kube(w1.kube.api, timeout=0.1)
    mkc = _mkc(manager, {"w1": slow_reader})
    wl, check = await _setup(manager)
    await mkc.sync(wl, check, _pending(), NOW)
    assert [r.status for r in w1.server.requests_to("POST", WORKLOADS)] == [201]
    assert mkc.writes.backoff.left("w1") == 0


# -- maybe created ---------------------------------------------------------------------------


async def test_a_create_not_answered_is_waited_for_not_sent_again(
    manager: FakeCluster, w1: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker makes the copy after the manager gave up on the answer: the copy is waited
    for, and once seen it counts as made; no second create goes out."""
    monkeypatch.setattr(mkcontroller, "REMOTE_WRITE_TIMEOUT_SECONDS", 0.1)
    w1.server.hold("POST", WORKLOADS)  # no answer within the manager's time
    workers = ReachableWorkers({"w1": w1.kube})
    mkc = _controller(manager, {}, Metrics(), _Events())
    mkc._remotes = workers  # type: ignore[assignment]
    mkc.writes.backoff = WorkerBackoff(initial=0.05, maximum=0.05)
    wl, check = await _setup(manager)
    synced = await mkc.sync(wl, check, _pending(), NOW)
    assert _posts(w1) == 1 and w1.server.objects(WORKLOADS) == []
    assert mkc.writes.maybe_there("w1", wl.key)
    await asyncio.sleep(0.06)  # past the backoff: only the unconfirmed copy holds it back
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert _posts(w1) == 1
    # The worker's API server made it after all (as a real one does once its webhook answers).
    w1.server.release()
    w1.server.add(WORKLOADS, remote_workload(wl, mkc.origin))
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert _posts(w1) == 1
    assert not mkc.writes.maybe_there("w1", wl.key)  # seen: confirmed
    assert synced.state.state == "Pending"


async def test_already_exists_is_waited_for_and_sent_again_when_it_never_shows(
    manager: FakeCluster, w1: FakeCluster
) -> None:
    """AlreadyExists names a copy the manager has not seen yet: it is not sent again while it
    may still show; when it has not shown within the confirmation window, it is."""
    w1.server.fail("POST", WORKLOADS, code=409, times=1)
    workers = ReachableWorkers({"w1": w1.kube})
    mkc = _controller(manager, {}, Metrics(), _Events())
    mkc._remotes = workers  # type: ignore[assignment]
    mkc.writes.confirm_seconds = 0.2
    wl, check = await _setup(manager)
    synced = await mkc.sync(wl, check, _pending(), NOW)
    assert _posts(w1) == 1
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert _posts(w1) == 1, "sent again while the copy may still show"
    # The end of the window queues the workload again, as an event would.
    await eventually(lambda: wl.key in workers.woken, what="the wake at the window's end")
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert _posts(w1) == 2
    assert w1.server.get(WORKLOADS, "job-j", "ns") is not None


async def test_a_copy_seen_in_the_watch_confirms_an_unanswered_create(
    manager: FakeCluster, w1: FakeCluster
) -> None:
    mkc = _mkc(manager, {"w1": w1.kube})
    wl, _ = await _setup(manager)
    mkc.writes.unconfirmed("w1", wl.key)
    assert mkc.writes.maybe_there("w1", wl.key)
    w1.server.add(WORKLOADS, remote_workload(wl, mkc.origin))
    await mkc._read_remotes(wl, ["w1"])
    assert not mkc.writes.maybe_there("w1", wl.key)


# -- the backoff -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "want"),
    [
        pytest.param(1, 1.0, id="first failure: the initial wait"),
        pytest.param(2, 2.0, id="doubles"),
        pytest.param(4, 8.0, id="doubles again"),
        pytest.param(10, 30.0, id="capped"),
    ],
)
def test_a_failing_worker_backs_off_exponentially(failures: int, want: float) -> None:
    now = [100.0]
    backoff = WorkerBackoff(initial=1.0, maximum=30.0, clock=lambda: now[0])
    delays = [backoff.failed("w1") for _ in range(failures)]
    assert delays[-1] == want
    assert backoff.left("w1") == want
    assert backoff.left("w2") == 0  # the other workers are not held back
    now[0] += want
    assert backoff.left("w1") == 0


def test_a_success_resets_the_backoff() -> None:
    backoff = WorkerBackoff(initial=1.0, maximum=30.0)
    for _ in range(3):
        backoff.failed("w1")
    backoff.succeeded("w1")
    assert backoff.left("w1") == 0
    assert backoff.failed("w1") == 1.0


async def test_a_worker_backing_off_gets_nothing_and_the_others_go_on(
    manager: FakeCluster, w1: FakeCluster, w2: FakeCluster
) -> None:
    mkc = _mkc(manager, {"w1": w1.kube, "w2": w2.kube})
    # A clock that stands still: the setup's real time (long on a loaded machine) must not
    # eat into the backoff the assertion below reads.
    mkc.writes.backoff = WorkerBackoff(initial=1.5, maximum=1.5, clock=lambda: 100.0)
    mkc.writes.backoff.failed("w1")
    wl, check = await _setup(manager)
    synced = await mkc.sync(wl, check, _pending(), NOW)
    assert _posts(w1) == 0
    assert w2.server.get(WORKLOADS, "job-j", "ns") is not None
    # Looked at again when w1 may be written to (no event would come of it).
    assert synced.again_after == 1.5


# -- a slow worker ----------------------------------------------------------------------------


async def test_a_slow_worker_does_not_hold_the_sync(
    manager: FakeCluster, w1: FakeCluster, w2: FakeCluster
) -> None:
    """The sync waits for its writes only briefly: w1's create goes on in the background, and
    its end queues the workload again."""
    workers = ReachableWorkers({"w1": w1.kube, "w2": w2.kube})
    mkc = _controller(manager, {}, Metrics(), _Events())
    mkc._remotes = workers  # type: ignore[assignment]
    mkc.writes.settle_seconds = 0.1
    wl, check = await _setup(manager)
    w1.server.hold("POST", WORKLOADS)
    try:
        # The held create would keep a sync waiting for it 30 s (REMOTE_WRITE_TIMEOUT_SECONDS);
        # the bound leaves room for a loaded machine (the settle itself is 0.1 s).
        started = time.monotonic()
        synced = await asyncio.wait_for(mkc.sync(wl, check, _pending(), NOW), 20)
        assert time.monotonic() - started < 10.0
        assert w2.server.get(WORKLOADS, "job-j", "ns") is not None
        assert mkc.writes.maybe_there("w1", wl.key)  # in flight
        # Another sync meanwhile sends no second create to w1.
        await mkc.sync(await _read(manager), check, synced.state, NOW)
        assert _posts(w1) == 1
    finally:
        w1.server.release()
    await eventually(lambda: wl.key in workers.woken, what="the wake at the create's end")
    assert w1.server.get(WORKLOADS, "job-j", "ns") is not None


async def test_one_slow_worker_does_not_hold_writes_to_another(
    manager: FakeCluster, w1: FakeCluster, w2: FakeCluster
) -> None:
    """With w1's write slots all taken by held creates, the next workload's copy to w2 is made
    at once."""
    mkc = _mkc(manager, {"w1": w1.kube, "w2": w2.kube})
    mkc.writes.settle_seconds = 0.05
    mkc.writes.per_worker = 1
    wl, check = await _setup(manager)
    w1.server.hold("POST", WORKLOADS)
    try:
        blocker = mkc.writes.start("create", "w1", "ns/other", lambda: asyncio.sleep(5, True))
        assert blocker is not None
        await mkc.sync(wl, check, _pending(), NOW)
        assert w2.server.get(WORKLOADS, "job-j", "ns") is not None
        assert _posts(w1) == 0  # queued behind w1's one slot
        blocker.cancel()
        await eventually(lambda: _posts(w1) == 1, what="w1's turn")
    finally:
        w1.server.release()
        await mkc.writes.close()


async def test_a_deletion_goes_after_the_same_copys_create_in_flight() -> None:
    """A loser's copy deleted while its create is still in flight: the deletion waits for the
    create, so that the copy the create makes is not left on the worker."""
    writes = RemoteWrites(wake=lambda _key: None)
    order: list[str] = []
    release = asyncio.Event()

    async def create() -> bool:
        await release.wait()
        order.append("create")
        return True

    async def delete() -> bool:
        order.append("delete")
        return True

    created = writes.start("create", "w1", "ns/a", create)
    deleted = writes.start("delete", "w1", "ns/a", delete)
    other = writes.start("delete", "w1", "ns/b", delete)  # another copy's: not held
    assert created is not None and deleted is not None and other is not None
    await other
    assert order == ["delete"]
    release.set()
    await deleted
    assert order == ["delete", "create", "delete"]


async def test_a_confirmed_copy_is_not_looked_at_again_at_the_windows_end() -> None:
    woken: list[str] = []
    writes = RemoteWrites(wake=woken.append, confirm_seconds=0.05)
    writes.unconfirmed("w1", "ns/seen")
    writes.unconfirmed("w1", "ns/unseen")
    writes.confirmed("w1", "ns/seen")
    await asyncio.sleep(0.1)
    assert woken == ["ns/unseen"]


async def test_a_winner_that_fails_the_jobs_read_backs_off_and_the_sync_goes_on(
    manager: FakeCluster, w1: FakeCluster, w2: FakeCluster
) -> None:
    """The winner's job is made in the background: a worker that fails its read (before the
    kind's watch has listed) is the worker's failure, backed off, not an exception lost in a
    task."""
    mkc = _mkc(manager, {"w1": w1.kube, "w2": w2.kube})
    # A clock that stands still: the real time between the sync and the assertion (0.4 s at
    # load 10 in a cold CI run) must not eat into the backoff the assertion compares with.
    mkc.writes.backoff = WorkerBackoff(initial=1.0, maximum=30.0, clock=lambda: 100.0)
    wl, check = await _setup(manager)
    synced = await mkc.sync(wl, check, _pending(), NOW)
    await w2.kube.modify_status(
        WORKLOADS, "job-j", lambda o: {**o, "status": _admitted_status()}, namespace="ns"
    )
    w2.server.fail("GET", JOBS, code=503, times=1)
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert synced.state.state == "Ready"
    assert w2.server.get(JOBS, "j", "ns") is None
    assert mkc.writes.backoff.left("w2") > 0
    assert synced.again_after is not None and synced.again_after <= mkc.writes.backoff.left("w2") + 0.1
