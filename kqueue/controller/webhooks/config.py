"""The Mutating/ValidatingWebhookConfigurations that route requests to kqueue's webhooks.

In a cluster they point at the webhook Service and the certificate manager injects the CA; for
local development (``make run``, the end-to-end tests) they point at
``https://127.0.0.1:<port>`` with the locally generated CA. Both come from
:func:`webhook_configurations`, so paths, rules and selectors are defined once.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kqueue.api.config import DEFAULT_FRAMEWORKS, LabelSelector
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import Webhook, registry
from kqueue.controller.kube import Conflict, Kube, NotFound
from kqueue.controller.resources import Resource
from kqueue.controller.webhook_server.server import WEBHOOK_TIMEOUT_SECONDS
from kqueue.controller.webhooks import framework_off, kinds, pod

Obj = dict[str, Any]

MUTATING_NAME: Final = "kqueue-mutating-webhook-configuration"
VALIDATING_NAME: Final = "kqueue-validating-webhook-configuration"

KQUEUE_PLURALS: Final = (
    "resourceflavors",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "workloadpriorityclasses",
    "workloads",
    "admissionchecks",
    "provisioningrequestconfigs",
    "multikueueconfigs",
    "multikueueclusters",
)


def _client_config(path: str, *, base_url: str | None, service: Mapping[str, str] | None,
                   ca_bundle: bytes | None) -> Obj:
    cfg: Obj
    if base_url is not None:
        cfg = {"url": base_url.rstrip("/") + path}
    elif service is not None:
        cfg = {"service": {**service, "path": path}}
    else:
        raise ValueError("webhook client config: give base_url or service")
    if ca_bundle:
        cfg["caBundle"] = base64.b64encode(ca_bundle).decode()
    return cfg


def _selector(sel: LabelSelector) -> Obj:
    out: Obj = {}
    if sel.match_labels:
        out["matchLabels"] = dict(sel.match_labels)
    if sel.match_expressions:
        out["matchExpressions"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in sel.match_expressions
        ]
    return out


def webhook_configurations(
    *,
    namespace_selector: LabelSelector,
    base_url: str | None = None,
    service: Mapping[str, str] | None = None,
    ca_bundle: bytes | None = None,
    manage_jobs_without_queue_name: bool = False,
    frameworks: Iterable[str] = DEFAULT_FRAMEWORKS,
    mutating_name: str = MUTATING_NAME,
    validating_name: str = VALIDATING_NAME,
    timeout_seconds: int = WEBHOOK_TIMEOUT_SECONDS,
) -> tuple[Obj, Obj]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) manifests.

    ``base_url`` (``https://127.0.0.1:9443``) or ``service`` (``{"name": ..., "namespace": ...,
    "port": 443}``) says where kqueue serves. Jobs are selected by the queue label (unless
    ``manage_jobs_without_queue_name``), a Job's pods by the managed label; namespaces by
    ``managedJobsNamespaceSelector``. Each framework in ``frameworks`` adds the webhooks it
    registered (:mod:`kqueue.controller.integrations`), mutating ones in their order, before
    the generic pod webhook ``mpod``. Every webhook fails closed but ``vintegrationoff``, which
    only reports a queue label on a kind whose integration is off (:mod:`.framework_off`).
    """
    ns_sel = _selector(namespace_selector)

    def hook(name: str, path: str, rules: list[Obj], **extra: Any) -> Obj:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": timeout_seconds,
            "clientConfig": _client_config(
                path, base_url=base_url, service=service, ca_bundle=ca_bundle
            ),
            "rules": rules,
            **extra,
        }

    def framework_hook(w: Webhook) -> Obj:
        extra: Obj = {
            "namespaceSelector": ns_sel,
            "objectSelector": w.object_selector(manage_jobs_without_queue_name),
        }
        if w.reinvocation_policy is not None:
            extra["reinvocationPolicy"] = w.reinvocation_policy
        return hook(w.name, w.path, [dict(r) for r in w.rules], **extra)

    frameworks = list(frameworks)
    enabled = registry.enabled(frameworks)
    ordered = sorted(
        ((w.order, i, w) for i, f in enumerate(enabled) for w in f.webhooks), key=lambda t: t[:2]
    )
    mutating_hooks = [framework_hook(w) for order, _, w in ordered if w.type == "mutating"]
    validating_hooks = [framework_hook(w) for _, _, w in ordered if w.type == "validating"]
    off_rules = framework_off.rules(framework_off.off_frameworks(frameworks))
    if off_rules:
        # The kinds of the integrations that are off, when they name a queue: reported, never
        # refused (failurePolicy Ignore).
        off_hook = hook(
            framework_off.NAME,
            framework_off.VALIDATE_PATH,
            off_rules,
            namespaceSelector=ns_sel,
            objectSelector={"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]},
        )
        off_hook["failurePolicy"] = "Ignore"
        validating_hooks.append(off_hook)
    pods_create = [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                    "operations": ["CREATE"]}]
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": mutating_name},
        "webhooks": [
            *mutating_hooks,
            hook(
                "mpod.kqueue.io",
                pod.MUTATE_PATH,
                pods_create,
                namespaceSelector=ns_sel,
                objectSelector={"matchLabels": {c.MANAGED_LABEL: "true"}},
                # Another mutating webhook may rewrite the pod after ours: check again.
                reinvocationPolicy="IfNeeded",
            ),
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": validating_name},
        "webhooks": [
            *validating_hooks,
            hook(
                "vkqueue.kqueue.io",
                kinds.VALIDATE_PATH,
                [{"apiGroups": [c.GROUP], "apiVersions": [c.VERSION],
                  "resources": list(KQUEUE_PLURALS), "operations": ["CREATE", "UPDATE"]}],
            ),
        ],
    }
    return mutating, validating


def _resource(cfg: Obj) -> Resource:
    return Resource("admissionregistration.k8s.io", "v1", cfg["kind"].lower() + "s", False)


async def install_webhook_configurations(kube: Kube, *configs: Obj) -> None:
    """Create or replace the given webhook configurations (local development and tests)."""
    for cfg in configs:
        resource = _resource(cfg)
        name = cfg["metadata"]["name"]
        for _ in range(5):
            try:
                try:
                    current = await kube.get(resource, name)
                except NotFound:
                    await kube.create(resource, cfg)
                else:
                    version = current["metadata"]["resourceVersion"]
                    await kube.replace(
                        resource, {**cfg, "metadata": {**cfg["metadata"], "resourceVersion": version}}
                    )
            except Conflict:
                continue  # written in between: read again
            break
        else:
            raise Conflict(what=f"{cfg['kind']} {name}", status=409, body={})


async def delete_webhook_configurations(kube: Kube, *configs: Obj) -> None:
    for cfg in configs:
        await kube.delete(_resource(cfg), cfg["metadata"]["name"])
