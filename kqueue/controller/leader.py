"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Only the leader admits workloads; standbys keep their informers warm and take over when the
leader stops renewing. The rules that keep two replicas from leading at once:

* every write carries the resourceVersion that was read (optimistic concurrency), so two
  candidates racing for an expired lease cannot both win;
* a standby measures a lease's expiry on its own monotonic clock, from the moment it *saw* the
  lease change, never from the ``renewTime`` written by another machine's clock;
* the leader gives up after ``renew_deadline`` without a successful renewal, which is shorter
  than ``lease_duration``, so it stops before anyone else may start. A watchdog ends leadership
  at that deadline, measured from the *start* of the last successful renewal, even while a
  renewal request hangs: the leading task (with its in-flight writes) is cancelled then.
* :meth:`LeaderElector.write_deadline` is that same moment: writers bound their requests by it
  (``Kube.write_deadline``), so a write is abandoned before the leadership it was issued under
  can end, and ``lease_duration - renew_deadline`` is left before another replica may lead.

A standby therefore takes over at most ``lease_duration`` (plus one ``retry_period`` of
polling) after it last saw the leader renew. A leader that shuts down cleanly releases the
lease, so its successor starts within one ``retry_period``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes_asyncio.client import ApiClient

from kqueue.api.config import Configuration
from kqueue.controller.clock import Clock, LoopClock
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.resources import LEASES

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# client-go's JitterFactor: retries wait retry_period * (1 + up to 20%).
_JITTER = 0.2


def default_identity() -> str:
    """``<hostname>_<pid>_<random>``: unique per process, readable in ``kubectl get lease``."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def _micro_time(moment: datetime) -> str:
    # metav1.MicroTime requires exactly six fractional digits; isoformat() drops them at .000000.
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for a Lease and runs ``on_started_leading`` while it holds it.

    ``on_started_leading`` runs as a task for as long as this replica leads and is cancelled
    when leadership is lost; ``on_stopped_leading`` runs after that. If the leading task ends
    (or crashes) on its own, the elector steps down so a healthy replica can take over. After
    losing leadership the elector campaigns again.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        name: str,
        namespace: str,
        identity: str | None = None,
        lease_duration: timedelta = timedelta(seconds=15),
        renew_deadline: timedelta = timedelta(seconds=10),
        retry_period: timedelta = timedelta(seconds=2),
        on_started_leading: Callable[[], Awaitable[None]] | None = None,
        on_stopped_leading: Callable[[], Awaitable[None] | None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        release_on_cancel: bool = True,
        clock: Clock | None = None,
    ) -> None:
        if lease_duration.total_seconds() < 1 or lease_duration.microseconds:
            raise ValueError(f"lease_duration: must be whole seconds >= 1, got {lease_duration}")
        if renew_deadline >= lease_duration:
            raise ValueError("renew_deadline: must be shorter than lease_duration")
        if renew_deadline <= retry_period * (1 + _JITTER):
            raise ValueError("renew_deadline: must be longer than 1.2 x retry_period")
        # The elector's own client on the shared connection pool: its writes are bounded by the
        # renew deadline (a hung request must not outlive the window in which this replica may
        # consider itself leader), never by the leadership they keep alive.
        self._kube = Kube(api_client, timeout=renew_deadline.total_seconds())
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self._lease_seconds = int(lease_duration.total_seconds())
        self._renew_deadline = renew_deadline.total_seconds()
        self._retry_period = retry_period.total_seconds()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        """Hand the lease back when :meth:`run` is cancelled (client-go's ReleaseOnCancel);
        turn it off when the leader's work may not have stopped cleanly."""
        self._clock = clock if clock is not None else LoopClock()
        self._is_leader = False
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.leader: str | None = None
        """The holder last seen on the lease (this replica's identity while it leads)."""
        self.last_renewed_at: float | None = None
        """Clock time of this replica's last successful acquire or renewal."""
        self._renewed_from: float | None = None
        # When the attempt that last succeeded started: the lease record it wrote is no older,
        # so no other replica can see it expire before this plus ``lease_duration``.
        self._attempt_started = 0.0

    @classmethod
    def from_config(
        cls,
        api_client: ApiClient,
        config: Configuration,
        **kwargs: Any,
    ) -> LeaderElector:
        """An elector with the Lease name, namespace and timings of ``config.leaderElection``."""
        le = config.leader_election
        return cls(
            api_client,
            name=le.resource_name,
            namespace=config.lease_namespace,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
            **kwargs,
        )

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    def write_deadline(self) -> float | None:
        """Clock time by which a write issued under this leadership must be over.

        It is the renew deadline: the moment this replica stops leading unless it renews first,
        counted from the start of its last successful renewal. Another replica can take the
        lease only ``lease_duration`` after that start, so a write bounded by this deadline ends
        ``lease_duration - renew_deadline`` before anyone else may lead. None while not
        leading: the leading task and its writes are cancelled and awaited when a term ends, and
        what remains (events posted at shutdown) does not act as leader.
        """
        if self._renewed_from is None or not self._is_leader:
            return None
        return self._renewed_from + self._renew_deadline

    def check(self) -> tuple[bool, str]:
        """A health summary (a standby is healthy too)."""
        role = "leader" if self._is_leader else f"standby (leader: {self.leader or 'none'})"
        return True, f"lease {self.namespace}/{self.name}: {self.identity} is {role}"

    # -- the campaign --------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead, and campaign again after losing; releases the lease when cancelled
        (unless ``release_on_cancel`` is off)."""
        while True:
            await self._acquire()
            try:
                outcome = await self._lead()
            except asyncio.CancelledError:
                await self._step_down(release=self.release_on_cancel)
                raise
            await self._step_down(release=True)
            if outcome == "task ended":
                # Give a healthy replica the first chance at the lease before trying again.
                await self._clock.sleep(self._lease_seconds)

    async def _acquire(self) -> None:
        logger.info(
            "leader election: %s campaigning for lease %s/%s",
            self.identity,
            self.namespace,
            self.name,
        )
        while True:
            if await self._try_acquire_or_renew():
                self._is_leader = True
                logger.info(
                    "leader election: %s acquired lease %s/%s",
                    self.identity,
                    self.namespace,
                    self.name,
                )
                return
            await self._clock.sleep(self._retry_period * (1 + random.random() * _JITTER))

    async def _lead(self) -> str:
        """Renew until the renew deadline passes without a renewal or the leading task ends;
        says which."""
        loop = asyncio.get_running_loop()
        leading: asyncio.Task[None] | None = None
        if self._on_started is not None:
            leading = loop.create_task(
                self._run_leading(self._on_started), name=f"leading {self.name}"
            )
        renewing = loop.create_task(self._keep_renewing(), name=f"renewing {self.name}")
        watchdog = loop.create_task(self._watch_deadline(), name=f"deadline {self.name}")
        waited: set[asyncio.Task[None]] = {renewing, watchdog}
        if leading is not None:
            waited.add(leading)
        try:
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if renewing.done() and not renewing.cancelled() and renewing.exception():
                logger.error(
                    "leader election: renewing lease %s/%s failed",
                    self.namespace,
                    self.name,
                    exc_info=renewing.exception(),
                )
            if watchdog.done() or renewing.done():
                logger.error(
                    "leader election: %s failed to renew lease %s/%s within %.1fs; "
                    "leadership lost",
                    self.identity,
                    self.namespace,
                    self.name,
                    self._renew_deadline,
                )
                return "lost"
            logger.error(
                "leader election: the leading task of %s ended; stepping down", self.identity
            )
            return "task ended"
        finally:
            # Leadership ends here, before anything else: nothing may act as leader from now on.
            self._is_leader = False
            for task in (renewing, watchdog, leading):
                if task is not None:
                    task.cancel()
            await asyncio.gather(
                *(t for t in (renewing, watchdog, leading) if t is not None),
                return_exceptions=True,
            )

    async def _run_leading(self, start: Callable[[], Awaitable[None]]) -> None:
        try:
            await start()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("leader election: the leading task of %s crashed", self.identity)

    async def _keep_renewing(self) -> None:
        """Renew every ``retry_period``; after a failure retry (jittered) until it works. Only
        the watchdog decides that leadership is lost, so a hung request cannot delay that."""
        # Leading is checked besides cancellation: a cancellation lost in a library would
        # otherwise keep renewing the lease of a replica that no longer leads.
        while self._is_leader:
            await self._clock.sleep(self._retry_period)
            while self._is_leader and not await self._try_acquire_or_renew():
                await self._clock.sleep(self._retry_period * (1 + random.random() * _JITTER))

    async def _watch_deadline(self) -> None:
        """Return once the renew deadline passed without a renewal moving it."""
        while True:
            deadline = self.write_deadline()
            remaining = -1.0 if deadline is None else deadline - self._clock.now()
            if remaining <= 0:
                return
            await self._clock.sleep(remaining)

    async def _step_down(self, *, release: bool) -> None:
        """After leading: release the lease if asked, then tell ``on_stopped_leading``."""
        self._is_leader = False
        if release:
            try:
                await self._release()
            except Exception as exc:
                logger.warning(
                    "leader election: could not release lease %s/%s: %s",
                    self.namespace,
                    self.name,
                    exc,
                )
        if self._on_stopped is not None:
            try:
                result = self._on_stopped()
                if result is not None:
                    await result
            except Exception:
                logger.exception("leader election: on_stopped_leading of %s failed", self.identity)

    # -- one attempt ---------------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        self._attempt_started = self._clock.now()
        now = datetime.now(UTC)
        try:
            try:
                lease = await self._kube.get(LEASES, self.name, self.namespace)
            except NotFound:
                return await self._create(now)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            self._observe(holder, spec)
            if holder and holder != self.identity:
                duration = spec.get("leaseDurationSeconds") or self._lease_seconds
                if self._observed_at + duration > self._clock.now():
                    return False  # held by someone else and not expired
            new_spec = dict(spec)
            new_spec.update(
                holderIdentity=self.identity,
                leaseDurationSeconds=self._lease_seconds,
                renewTime=_micro_time(now),
            )
            if holder != self.identity:
                new_spec["acquireTime"] = _micro_time(now)
                new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": lease["metadata"],  # carries resourceVersion: a stale write fails
                "spec": new_spec,
            }
            try:
                updated = await self._kube.replace(LEASES, body, namespace=self.namespace)
            except Conflict:
                return False  # someone else wrote in between
            self._succeeded(updated)
            return True
        except KubeError as exc:
            logger.warning("leader election: lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    async def _create(self, now: datetime) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._lease_seconds,
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            created = await self._kube.create(LEASES, body, self.namespace)
        except Conflict:
            return False  # another candidate created it first
        self._succeeded(created)
        return True

    def _succeeded(self, lease: Obj) -> None:
        spec = lease.get("spec") or {}
        self._observe(self.identity, spec)
        self.last_renewed_at = self._clock.now()
        self._renewed_from = self._attempt_started

    def _observe(self, holder: str, spec: Obj) -> None:
        record = (
            holder,
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseDurationSeconds"),
            spec.get("leaseTransitions"),
        )
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock.now()
        if holder != self.leader:
            self.leader = holder or None
            if holder:
                logger.info(
                    "leader election: lease %s/%s is held by %s", self.namespace, self.name, holder
                )
                if self._on_new_leader is not None:
                    try:
                        self._on_new_leader(holder)
                    except Exception:
                        logger.exception("leader election: on_new_leader failed")

    async def _release(self) -> None:
        """Hand the lease back (only if we still hold it), so a standby starts at once."""
        try:
            lease = await self._kube.get(LEASES, self.name, self.namespace)
        except KubeError:
            return
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        now = _micro_time(datetime.now(UTC))
        # client-go's release: no holder, a one-second duration, and the transition count kept.
        new_spec = {
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": spec.get("leaseTransitions") or 0,
        }
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": lease["metadata"],
            "spec": new_spec,
        }
        try:
            await self._kube.replace(LEASES, body, namespace=self.namespace)
        except KubeError:
            return
        self.leader = None
        logger.info(
            "leader election: %s released lease %s/%s", self.identity, self.namespace, self.name
        )
