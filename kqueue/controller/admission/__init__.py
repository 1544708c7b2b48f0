"""Admission webhooks: the HTTPS server (``server``), its certificates (``certs``) and JSON Patch."""

from kqueue.controller.admission.server import (
    AdmissionRequest,
    FieldError,
    Handler,
    Verdict,
    WebhookServer,
)

__all__ = ["AdmissionRequest", "FieldError", "Handler", "Verdict", "WebhookServer"]
