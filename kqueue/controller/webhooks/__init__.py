"""kqueue's admission webhooks, registered on the webhook server (served by every replica).

``/mutate-batch-v1-job`` and ``/validate-batch-v1-job`` (Jobs that name a queue),
``/mutate--v1-pod`` (managed pods), ``/validate-kqueue-io-v1alpha1`` (the kqueue.io kinds).
:mod:`.config` builds the webhook configurations that route requests to them.
"""

from __future__ import annotations

from kqueue.controller.webhook import WebhookServer
from kqueue.controller.webhooks import job, kinds, pod


def register(server: WebhookServer, *, manage_jobs_without_queue_name: bool = False) -> None:
    jobs = job.JobWebhooks(manage_jobs_without_queue_name=manage_jobs_without_queue_name)
    server.add_mutating(job.MUTATE_PATH, jobs.mutate)
    server.add_validating(job.VALIDATE_PATH, jobs.validate)
    server.add_mutating(pod.MUTATE_PATH, pod.mutate_pod)
    server.add_validating(kinds.VALIDATE_PATH, kinds.validate_kqueue_object)


__all__ = ["register"]
