"""The one pod-release path of every integration: admitted pods leave the gate, never too many.

Given an admitted Workload's pods grouped by pod set, :meth:`PodReleaser.release`:

1. counts per pod set the pods already running: ungated, or released by us and not yet shown
   again by the informer (client-go's "expectations": without them a newer gated pod would take
   the place of one in flight, one pod too many);
2. releases the oldest gated pods up to the admitted count (partial admission, or surplus pods
   their controller has not deleted yet, are left gated);
3. sends the releases concurrently, at most ``per_object`` in flight for one workload and
   ``in_flight`` in all, each a JSON patch that first tests the gate is still where the informer
   saw it (:func:`~kqueue.controller.gate.release_ops`), so a stale copy never
   removes someone else's gate.

Releasing is idempotent: a pod already released, gone, or changed since it was seen counts as
done (its update brings the workload back).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import PodSetUpdate, ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.gate import PodSetRelease, is_gated, release_ops, ungate
from kqueue.controller.informer import Store
from kqueue.controller.kube import JSON_PATCH, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import PODS, object_key
from kqueue.controller.topology import pin, ranked_domains

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# Pod releases in flight: per workload, so one large Job does not take every slot, and in all,
# so many workloads admitted at once do not open hundreds of connections to the API server.
RELEASES_PER_OBJECT = 16
RELEASES_IN_FLIGHT = 64
# Expectations kept at most; past this they are dropped (a pod then may be patched once more,
# and its "test" makes the extra patch fail harmlessly).
_MAX_EXPECTATIONS = 50_000


def pod_set_releases(wl: Workload, flavors: Store[ResourceFlavor]) -> dict[str, PodSetRelease]:
    """Per admitted pod set: how many pods, and the flavors' node labels and tolerations."""
    out: dict[str, PodSetRelease] = {}
    adm = wl.status.admission
    if adm is None:
        return out
    for psa in adm.pod_set_assignments:
        node_selector: dict[str, str] = {}
        tolerations: list[Obj] = []
        for flavor_name in sorted(set(psa.flavors.values())):
            flavor = flavors.get(flavor_name)
            if flavor is None:
                continue
            node_selector.update(flavor.spec.node_labels)
            tolerations += [t.to_dict() for t in flavor.spec.tolerations]
        pod_set = wl.pod_set(psa.name)
        count = psa.count if psa.count is not None else (pod_set.count if pod_set else 0)
        domains = pin(psa.topology_assignment)
        labels = {c.TAS_LABEL: "true"} if domains else {}
        annotations: dict[str, str] = {}
        # The admission checks' podSetUpdates (Kueue's podset.Merge on start).
        for update in check_updates(wl, psa.name):
            labels.update(update.labels)
            annotations.update(update.annotations)
            node_selector.update(update.node_selector)
            tolerations += [t.to_dict() for t in update.tolerations]
        out[psa.name] = PodSetRelease(
            psa.name,
            count,
            node_selector,
            tuple(tolerations),
            domains=domains,
            labels=labels,
            annotations=annotations,
        )
    return out


def check_updates(wl: Workload, pod_set: str) -> list[PodSetUpdate]:
    """The podSetUpdates of ``wl``'s admission checks for ``pod_set``, in check order."""
    return [
        u for state in wl.status.admission_checks for u in state.pod_set_updates
        if u.name == pod_set
    ]


def _node_selector(pod: Obj) -> Mapping[str, str]:
    return (pod.get("spec") or {}).get("nodeSelector") or {}


def pinned(
    release: PodSetRelease,
    running: Sequence[Obj],
    gated: Sequence[Obj],
    selector_of: Callable[[Obj], Mapping[str, str]] = _node_selector,
) -> list[tuple[Obj, PodSetRelease]]:
    """Each gated pod with the release pinning it to a domain: its rank's, when the pods have
    ranks (:func:`~kqueue.controller.topology.ranked_domains`), else one that has room left:
    the domain's pod count minus the running pods already pinned there (Kueue's TAS ungater).
    ``selector_of`` gives a running pod's node selector (for a pod whose release is in flight,
    the one it was released with: the informer's copy does not show it yet)."""

    def pinned_to(pod: Obj, i: int) -> tuple[Obj, PodSetRelease]:
        selector = {**release.node_selector, **release.domains[i][0]}
        return pod, replace(release, node_selector=selector)

    # Pods with ranks (their integration declares where) go to their rank's domain, as
    # Kueue's ungater does.
    by_rank = ranked_domains(
        release.domains, running, gated, selector_of, release.ranks, release.count
    )
    if by_rank is not None:
        return [pinned_to(pod, i) for pod, i in zip(gated, by_rank, strict=True)]

    def within(pod: Obj, selector: Mapping[str, str]) -> bool:
        have = selector_of(pod)
        return all(have.get(k) == v for k, v in selector.items())

    left = [n - sum(1 for p in running if within(p, sel)) for sel, n in release.domains]
    out: list[tuple[Obj, PodSetRelease]] = []
    for pod in gated:
        i = next((i for i, n in enumerate(left) if n > 0), None)
        if i is None:
            break
        left[i] -= 1
        out.append(pinned_to(pod, i))
    return out


@dataclass(frozen=True)
class Released:
    """What one call did: pods released now, pods that should have been, pods already running."""

    released: int
    wanted: int
    running: int
    held: tuple[tuple[Obj, str, int], ...] = ()
    """Gated pods left behind the gate because their pod set's admitted count is reached:
    (pod, pod set, admitted count)."""

    @property
    def complete(self) -> bool:
        return self.released == self.wanted


def _age(pod: Obj) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


class PodReleaser:
    def __init__(
        self,
        *,
        kube: Kube,
        metrics: Metrics,
        now: Now,
        per_object: int = RELEASES_PER_OBJECT,
        in_flight: int = RELEASES_IN_FLIGHT,
    ) -> None:
        if per_object < 1 or in_flight < 1:
            raise ValueError(
                f"per_object ({per_object}) and in_flight ({in_flight}) must be at least 1"
            )
        self._kube = kube
        self._metrics = metrics
        self._now = now
        self._per_object = per_object
        self._slots = asyncio.Semaphore(in_flight)
        # Pods released by us, by UID, with the resourceVersion seen before releasing: until
        # the informer shows a newer version, the pod counts as released.
        self._released: dict[str, str] = {}
        # The node selector each of those pods was released with (topology domains).
        self._selectors: dict[str, Mapping[str, str]] = {}

    def releasing(self, pod: Obj) -> bool:
        """Released by us; the informer has not shown it since."""
        meta = pod.get("metadata") or {}
        return self._released.get(str(meta.get("uid") or "")) == str(
            meta.get("resourceVersion") or ""
        )

    def running(self, pod: Obj) -> bool:
        return not is_gated(pod) or self.releasing(pod)

    def _selector_of(self, pod: Obj) -> Mapping[str, str]:
        if self.releasing(pod):
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            return self._selectors.get(uid, {})
        return _node_selector(pod)

    async def release(
        self,
        pods_by_set: Mapping[str, Sequence[Obj]],
        releases: Mapping[str, PodSetRelease],
        *,
        admitted_at: datetime | None,
        cluster_queue: str = "",
        is_group: bool = False,
    ) -> Released:
        """Release gated pods of each admitted pod set up to its count. ``pods_by_set`` holds
        the live pods (not terminal, not being deleted) of the workload."""
        todo: list[tuple[Obj, PodSetRelease]] = []
        held: list[tuple[Obj, str, int]] = []
        running = 0
        for set_name, members in sorted(pods_by_set.items()):
            release = releases.get(set_name)
            if release is None:
                continue
            here = sum(1 for p in members if self.running(p))
            running += here
            gated = sorted((p for p in members if not self.running(p)), key=_age)
            chosen = gated[: max(release.count - here, 0)]
            held += [(p, set_name, release.count) for p in gated[len(chosen):]]
            if release.domains:
                running_pods = [p for p in members if self.running(p)]
                todo += pinned(release, running_pods, chosen, self._selector_of)
            else:
                todo += [(pod, release) for pod in chosen]
        released = await self._release_all(todo, admitted_at, cluster_queue, is_group)
        return Released(
            released=released, wanted=len(todo), running=running, held=tuple(held)
        )

    async def _release_all(
        self,
        todo: Sequence[tuple[Obj, PodSetRelease]],
        admitted_at: datetime | None,
        cluster_queue: str,
        is_group: bool,
    ) -> int:
        """Every release runs to its end before an unexpected error (not an API answer) is
        raised, so none is left in flight."""
        per_object = asyncio.Semaphore(self._per_object)

        async def one(pod: Obj, release: PodSetRelease) -> bool:
            async with per_object, self._slots:
                if not await self._release_pod(pod, release):
                    return False
            if admitted_at is not None:
                waited = (self._now() - admitted_at).total_seconds()
                self._metrics.gate_removal(
                    max(waited, 0.0), cluster_queue=cluster_queue, is_group=is_group
                )
            return True

        results = await asyncio.gather(*(one(p, r) for p, r in todo), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return sum(1 for result in results if result)

    async def _release_pod(self, pod: Obj, release: PodSetRelease) -> bool:
        meta = pod.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        if self._released.get(uid) == version:
            return True
        new = ungate(pod, release)
        if new is None:
            return True
        try:
            await self._kube.patch(
                PODS,
                str(meta["name"]),
                release_ops(pod, new),
                namespace=meta.get("namespace"),
                content_type=JSON_PATCH,
            )
        except NotFound:
            return True
        except KubeError as exc:
            if exc.status == 422:
                # The "test" failed: the pod changed since the informer saw it; its update
                # event brings the workload back with the current pod.
                logger.debug("pod %s changed before its release: %s", object_key(pod), exc)
                return True
            logger.info("releasing pod %s: %s", object_key(pod), exc)
            return False
        if len(self._released) > _MAX_EXPECTATIONS:
            self._released.clear()
            self._selectors.clear()
        self._released[uid] = version
        if release.domains or release.labels:
            self._selectors[uid] = dict(
                (new.get("spec") or {}).get("nodeSelector") or {}
            )
        return True
