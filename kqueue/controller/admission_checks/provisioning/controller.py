"""The ProvisioningRequest admission check (controllerName ``kqueue.io/provisioning-request``),
Kueue's ``pkg/controller/admissionchecks/provisioning`` on kqueue's client.

Per admission attempt of a workload it creates the PodTemplates and the
``autoscaling.x-k8s.io/v1`` ProvisioningRequest (requests.py), and follows the request's
conditions: it reads the request by its name (each attempt's is known) every
``POLL_SECONDS`` while the check waits, and every ``WATCH_SECONDS`` while an admitted workload
runs on the capacity (CapacityRevoked). On eviction and when the workload finishes, the
workload's requests and templates are deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Final

from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    AdmissionCheckState,
    ClusterQueue,
    ProvisioningRequestConfig,
    ResourceFlavor,
    Workload,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission_checks.framework import Inactive, Synced
from kqueue.controller.admission_checks.framework import with_state as _with
from kqueue.controller.admission_checks.provisioning import requests as pr
from kqueue.controller.admission_checks.workload_checks import required_checks
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.resources import Resource

logger = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "kqueue.io/provisioning-request"
CONFIG_KIND: Final = "ProvisioningRequestConfig"
PROVISIONING_REQUESTS: Final = Resource(pr.API_GROUP, "v1", "provisioningrequests")
POD_TEMPLATES: Final = Resource("", "v1", "podtemplates")
POLL_SECONDS: Final = 2.0
WATCH_SECONDS: Final = 5.0


def checks_using(config: str, checks: Iterable[AdmissionCheck]) -> list[str]:
    """The ProvisioningRequest checks whose parameters name the ProvisioningRequestConfig
    ``config``: those to look at again when it changes (Kueue's AdmissionCheckUsingConfigKey
    index)."""
    out = []
    for ac in checks:
        params = ac.spec.parameters
        if (
            config and ac.spec.controller_name == CONTROLLER_NAME and params is not None
            and params.api_group == c.GROUP and params.kind == CONFIG_KIND
            and params.name == config
        ):
            out.append(ac.name)
    return sorted(out)


class ProvisioningController:
    """The built-in ProvisioningRequest check controller."""

    controller_name = CONTROLLER_NAME

    def __init__(
        self,
        *,
        configs: Store[ProvisioningRequestConfig],
        flavors: Store[ResourceFlavor],
        kube: Kube,
        events: EventRecorder,
        cluster_queues: Store[ClusterQueue] | None = None,
    ) -> None:
        self._configs = configs
        self._flavors = flavors
        self._cluster_queues = cluster_queues
        self._kube = kube
        self._events = events

    def config_for(self, check: AdmissionCheck) -> ProvisioningRequestConfig | None:
        params = check.spec.parameters
        if params is None or params.kind != CONFIG_KIND or params.api_group != c.GROUP:
            return None
        return self._configs.get(params.name or "")

    def inactive(self, check: AdmissionCheck) -> Inactive | None:
        """Kueue's provisioning AdmissionCheck reconciler: active only with parameters naming
        an existing ProvisioningRequestConfig."""
        params = check.spec.parameters
        if params is None:
            return Inactive(
                "BadParametersRef",
                "spec.parameters is not set; the check needs a ProvisioningRequestConfig "
                "(apiGroup kqueue.io, kind ProvisioningRequestConfig)",
            )
        if params.api_group != c.GROUP or params.kind != CONFIG_KIND:
            return Inactive(
                "BadParametersRef",
                f"spec.parameters names {params.api_group}/{params.kind}; allowed: apiGroup "
                f"{c.GROUP}, kind {CONFIG_KIND}",
            )
        if self._configs.get(params.name or "") is None:
            return Inactive(
                "ProvisioningRequestConfigNotFound",
                f"ProvisioningRequestConfig {params.name} (spec.parameters.name) not found",
            )
        return None

    def _flavor_labels(self) -> Mapping[str, Mapping[str, str]]:
        return {rf.name: rf.spec.node_labels for rf in self._flavors.objects()}

    def _flavor_tolerations(self) -> Mapping[str, list[dict[str, object]]]:
        return {
            rf.name: [t.to_dict() for t in rf.spec.tolerations] for rf in self._flavors.objects()
        }

    async def sync(
        self, wl: Workload, check: AdmissionCheck, state: AdmissionCheckState, now: datetime
    ) -> Synced:
        new = await self._sync(wl, check, state, now)
        if new.state.state != state.state:
            self._events.record(
                wl.to_dict(), "Normal", "AdmissionCheckUpdated",
                f"Admission check {check.name} updated state from {state.state} to "
                f"{new.state.state}"
                + (f" with message: {new.state.message}" if new.state.message else ""),
            )
        return new

    async def _sync(
        self, wl: Workload, check: AdmissionCheck, state: AdmissionCheckState, now: datetime
    ) -> Synced:
        prc = self.config_for(check)
        if prc is None:
            return Synced(_with(state, "Pending", pr.CHECK_INACTIVE_MESSAGE, now))
        namespace = wl.namespace or "default"
        name = pr.request_name(wl.name, check.name, pr.attempt(state))
        if not pr.required_pod_sets(wl, prc.spec.managed_resources):
            if state.state == "Ready":
                return Synced(state)
            # A request made before the workload lost its pods (all counts 0) is not needed.
            await self._delete_request(wl, name)
            return Synced(
                state.model_copy(
                    update={"state": "Ready", "message": pr.NO_REQUEST_NEEDED,
                            "last_transition_time": now, "pod_set_updates": []}
                )
            )
        try:
            request = await self._kube.get(PROVISIONING_REQUESTS, name, namespace)
        except NotFound:
            if state.state in ("Ready", "Retry", "Rejected"):
                return Synced(state)  # decided; the request was cleaned up
            return await self._create(wl, check.name, state, prc, now)
        if not pr.owned_by(request, wl):
            # Someone else's request has this attempt's name: never follow its conditions
            # (Kueue reports the collision the same way).
            message = (
                f'Error creating ProvisioningRequest "{name}": '
                f'provisioningrequests.{pr.API_GROUP} "{name}" already exists'
            )
            if state.message != message:
                self._events.record(wl.to_dict(), "Warning", "FailedCreate", message)
            return Synced(_with(state, "Pending", message, now), again_after=POLL_SECONDS * 5)
        new = pr.next_state(wl, state, request, prc, now)
        again = WATCH_SECONDS if new.state == "Ready" else POLL_SECONDS
        return Synced(new, again_after=again if new.state in ("Pending", "Ready") else None)

    async def _create(
        self, wl: Workload, check: str, state: AdmissionCheckState,
        prc: ProvisioningRequestConfig, now: datetime,
    ) -> Synced:
        request, templates = pr.build(
            wl, check, pr.attempt(state), prc, self._flavor_labels(), self._flavor_tolerations()
        )
        namespace = wl.namespace or "default"
        name = request["metadata"]["name"]
        await self._delete_unused(wl)
        failed: tuple[str, KubeError] | None = None
        for template in templates:
            try:
                await _create_once(self._kube, POD_TEMPLATES, template, namespace)
            except KubeError as exc:
                failed = (f'PodTemplate "{template["metadata"]["name"]}"', exc)
                break
        created = False
        if failed is None:
            try:
                created = await _create_once(self._kube, PROVISIONING_REQUESTS, request, namespace)
            except KubeError as exc:
                failed = (f'ProvisioningRequest "{name}"', exc)
        if failed is not None:
            message = f"Error creating {failed[0]}: {failed[1]}"
            self._events.record(wl.to_dict(), "Warning", "FailedCreate", message)
            return Synced(_with(state, "Pending", message, now), again_after=POLL_SECONDS * 5)
        if created:
            self._events.record(
                wl.to_dict(), "Normal", "ProvisioningRequestCreated",
                f'Created ProvisioningRequest: "{name}"',
            )
        # Not created: it exists already; the next sync reads it (and whose it is).
        return Synced(_with(state, "Pending", "", now), again_after=POLL_SECONDS)

    async def _delete_request(self, wl: Workload, name: str) -> None:
        """Delete the request ``name`` of ``wl`` and its PodTemplates, if they exist."""
        namespace = wl.namespace or "default"
        try:
            request = await self._kube.get(PROVISIONING_REQUESTS, name, namespace)
        except NotFound:
            return
        if not pr.owned_by(request, wl):
            return
        for ps in request["spec"].get("podSets") or []:
            await self._kube.delete(POD_TEMPLATES, ps["podTemplateRef"]["name"], namespace=namespace)
        await self._kube.delete(PROVISIONING_REQUESTS, name, namespace=namespace)

    async def _delete_unused(self, wl: Workload) -> None:
        """Before an attempt's request is made: delete the workload's requests that are no
        check's current attempt (a check dropped from its ClusterQueue while the workload
        waits), Kueue's ``deleteUnusedProvisioningRequests``. The checks the ClusterQueue
        requires count too: one added this round has no state in ``wl`` yet, but may have
        made its request already."""
        uid = wl.metadata.uid
        if not uid or self._cluster_queues is None or wl.status.admission is None:
            return
        cq = self._cluster_queues.get(wl.status.admission.cluster_queue)
        attempts = {s.name: pr.attempt(s) for s in wl.status.admission_checks}
        for check in required_checks(wl, cq):
            attempts.setdefault(check, 1)
        current = {pr.request_name(wl.name, check, n) for check, n in attempts.items()}
        try:
            items = await self._kube.list(
                PROVISIONING_REQUESTS, namespace=wl.namespace or "default",
                label_selector=f"{pr.WORKLOAD_UID_LABEL}={uid}",
            )
        except NotFound:
            return
        for item in items:
            if item["metadata"]["name"] not in current:
                await self._delete_request(wl, item["metadata"]["name"])

    async def cleanup(self, wl: Workload) -> None:
        """Delete the workload's ProvisioningRequests and PodTemplates (by its UID label)."""
        uid = wl.metadata.uid
        if not uid:
            return
        namespace = wl.namespace or "default"
        selector = f"{pr.WORKLOAD_UID_LABEL}={uid}"
        for resource in (PROVISIONING_REQUESTS, POD_TEMPLATES):
            try:
                items = await self._kube.list(resource, namespace=namespace, label_selector=selector)
            except NotFound:
                continue  # the ProvisioningRequest API is not served: nothing was created
            for item in items:
                await self._kube.delete(resource, item["metadata"]["name"], namespace=namespace)


async def _create_once(kube: Kube, resource: Resource, obj: dict[str, object], namespace: str) -> bool:
    """Create ``obj``; False when it exists already (409 AlreadyExists: an earlier reconcile's
    creation, or another's object of the same name)."""
    try:
        await kube.create(resource, obj, namespace)
    except Conflict:
        return False
    return True
