"""The transport of kqueue's admission webhooks: the HTTPS server (``server``), its certificates
(``certs``) and JSON Patch (``patch``). What the webhooks decide lives in
:mod:`kqueue.controller.webhooks` and in each integration's ``webhook`` module."""

from kqueue.controller.webhook_server.server import (
    AdmissionRequest,
    FieldError,
    Handler,
    Verdict,
    WebhookServer,
)

__all__ = ["AdmissionRequest", "FieldError", "Handler", "Verdict", "WebhookServer"]
