"""kqueue's admission webhooks, registered on the webhook server (served by every replica).

Core: ``/mutate--v1-pod`` (pods of every integration: born behind the admission gate) and
``/validate-kqueue-io-v1alpha1`` (the kqueue.io kinds) and ``/validate-integration-off`` (a
queue label on a kind whose integration is off: :mod:`.framework_off`). Each integration adds its own
(:mod:`kqueue.controller.integrations`): an enabled one its handlers, a disabled one a handler
that allows unchanged (a webhook configuration made for other frameworks may still route to it,
and failing closed would block the objects of a kind kqueue is not managing). :mod:`.config`
builds the webhook configurations that route requests to them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kqueue.api.config import Configuration
from kqueue.controller.events import EventRecorder
from kqueue.controller.gang import read_named, size_epoch
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import ComposableJob, WebhookContext
from kqueue.controller.kube import Kube
from kqueue.controller.webhook_server import AdmissionRequest, Verdict, WebhookServer
from kqueue.controller.webhooks import framework_off, kinds, multikueue, pod


async def _allow(_req: AdmissionRequest) -> Verdict:
    return Verdict.allow()


def register(
    server: WebhookServer,
    config: Configuration | None = None,
    *,
    local_queues: Callable[[str], list[str] | None] = lambda _namespace: None,
    gang: Callable[[], bool] = lambda: False,
    per_size_groups: Callable[[], bool] = lambda: True,
    read_group: Callable[[str, str], Awaitable[dict[str, Any] | None]] = pod.no_group,
    kube: Kube | None = None,
    events: EventRecorder | None = None,
    multikueue_queue: multikueue.MultiKueueQueue = lambda _namespace, _queue: False,
) -> None:
    """``multikueue_queue``: whether a LocalQueue's ClusterQueue uses a MultiKueue check (the
    kinds MultiKueue dispatches get ``spec.managedBy`` defaulted there: :mod:`.multikueue`)."""
    config = config if config is not None else Configuration()
    ctx = WebhookContext(config=config, local_queues=local_queues)
    on = set(config.integrations.frameworks)
    server.add_mutating(
        pod.MUTATE_PATH,
        pod.pod_mutator(
            gang,
            claimant(on),
            identities(on, kube, per_size_groups, config) if kube is not None else pod.as_claimed,
            read_group,
        ),
    )
    server.add_validating(kinds.VALIDATE_PATH, kinds.validate_kqueue_object)
    # A queue label on a kind whose integration is off: a warning and an event, never a refusal.
    server.add_validating(
        framework_off.VALIDATE_PATH,
        framework_off.reporter(list(config.integrations.frameworks), events),
    )
    for framework in registry.frameworks():
        for hook in framework.webhooks:
            handler = hook.handler(ctx) if framework.name in on else _allow
            managed_by = multikueue.defaulted_kind(framework.api_version, framework.kind)
            if hook.type == "mutating" and framework.name in on and managed_by is not None:
                handler = multikueue.defaulting(handler, managed_by, multikueue_queue)
            if hook.type == "mutating":
                server.add_mutating(hook.path, handler)
            else:
                server.add_validating(hook.path, handler)


def claimant(enabled: set[str]) -> pod.Claimant:
    """Which enabled integration's object a pod's workload belongs to: ``(kind, name, uid)``,
    the UID when that object is the pod's direct controller (else None).

    A pod claimed by two (a child Job's pod is also its top-level object's) belongs to the top-level one,
    the object that is not its direct controller."""
    jobs = [
        job
        for fw in registry.frameworks()
        if fw.name in enabled and fw.job is not None
        and not isinstance(job := fw.job(), ComposableJob)
    ]
    # Composed kinds (plain pod groups) say which workload a pod is part of.
    own = [
        fw.pod_workload
        for fw in registry.frameworks()
        if fw.name in enabled and fw.pod_workload is not None
    ]

    def claim(p: dict[str, Any]) -> tuple[str, str, str | None] | None:
        found = [(j.kind, key) for j in jobs if (key := j.owner_of_pod(p)) is not None]
        if not found:
            for workload_of in own:
                if (kind_name := workload_of(p)) is not None:
                    return kind_name[0], kind_name[1], None
            return None
        direct = {
            str(r.get("kind")): str(r.get("uid") or "") or None
            for r in (p.get("metadata") or {}).get("ownerReferences") or []
            if r.get("controller")
        }
        top = [f for f in found if f[0] not in direct] or found
        kind, key = top[0]
        return kind, key.rpartition("/")[2], direct.get(kind)

    return claim


def identities(
    enabled: set[str],
    kube: Kube,
    per_size_groups: Callable[[], bool] = lambda: True,
    config: Configuration | None = None,
) -> pod.Identity:
    """The UID (when the pod does not carry it) and size epoch (:attr:`Framework.resizable`)
    of an enabled kind's object, read from the API server when its pod is created (only with
    gang scheduling on); no read for a pod whose controller is the object when its kind never
    resizes. A Job's pods are read: whether it is elastic is the Job's annotation. No epoch
    when ``per_size_groups`` says the served PodGroup can change its minCount (v1beta1): every
    size of the object shares one group. Whether a kind resizes follows ``config``'s gates (a
    Job annotated elastic does not with ElasticJobsViaWorkloadSlices off)."""
    config = config if config is not None else Configuration()
    kinds = {
        fw.kind: (job.resource, fw.resizable_for(config))
        for fw in registry.frameworks()
        if fw.name in enabled and fw.job is not None
        and not isinstance(job := fw.job(), ComposableJob)
    }

    async def identity(
        kind: str, namespace: str, name: str, uid: str | None
    ) -> tuple[str | None, str | None]:
        entry = kinds.get(kind)
        if entry is None or (uid is not None and (entry[1] is None or not per_size_groups())):
            return uid, None
        obj = await read_named(kube, entry[0], namespace, name)
        if obj is None:
            return uid, None
        found = str((obj.get("metadata") or {}).get("uid") or "") or None
        return uid or found, size_epoch(obj, entry[1]) if per_size_groups() else None

    return identity


__all__ = ["claimant", "identities", "register"]
