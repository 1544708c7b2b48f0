"""kqueue's admission webhooks, registered on the webhook server (served by every replica).

Core: ``/mutate--v1-pod`` (pods of every integration: born behind the admission gate) and
``/validate-kqueue-io-v1alpha1`` (the kqueue.io kinds). Each integration adds its own
(:mod:`kqueue.controller.integrations`): an enabled one its handlers, a disabled one a handler
that allows unchanged (a webhook configuration made for other frameworks may still route to it,
and failing closed would block the objects of a kind kqueue is not managing). :mod:`.config`
builds the webhook configurations that route requests to them.
"""

from __future__ import annotations

from collections.abc import Callable

from kqueue.api.config import Configuration
from kqueue.controller.admission import AdmissionRequest, Verdict, WebhookServer
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import WebhookContext
from kqueue.controller.webhooks import kinds, pod


async def _allow(_req: AdmissionRequest) -> Verdict:
    return Verdict.allow()


def register(
    server: WebhookServer,
    config: Configuration | None = None,
    *,
    local_queues: Callable[[str], list[str] | None] = lambda _namespace: None,
) -> None:
    config = config if config is not None else Configuration()
    ctx = WebhookContext(config=config, local_queues=local_queues)
    on = set(config.integrations.frameworks)
    server.add_mutating(pod.MUTATE_PATH, pod.mutate_pod)
    server.add_validating(kinds.VALIDATE_PATH, kinds.validate_kqueue_object)
    for framework in registry.frameworks():
        for hook in framework.webhooks:
            handler = hook.handler(ctx) if framework.name in on else _allow
            if hook.type == "mutating":
                server.add_mutating(hook.path, handler)
            else:
                server.add_validating(hook.path, handler)


__all__ = ["register"]
