"""A queue label on a kind whose integration is off: a warning and an event naming the object,
the label and ``integrations.frameworks``; never a refusal; routed only for the off kinds."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.config import default_managed_namespace_selector
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import derived
from kqueue.controller.webhook_server import AdmissionRequest
from kqueue.controller.webhooks import framework_off
from kqueue.controller.webhooks.config import webhook_configurations

Obj = dict[str, Any]
ON = ["batch/job", "pod"]


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[Obj, str, str, str]] = []

    def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.recorded.append((obj, type_, reason, message))


def _jobset(labels: dict[str, str]) -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "uid": "u1", "labels": labels},
        "spec": {},
    }


def _request(obj: Obj, old: Obj | None = None, *, dry_run: bool = False) -> AdmissionRequest:
    return AdmissionRequest(
        uid="r", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
        resource={"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"},
        namespace="team-a", name="js", object=obj, old_object=old, dry_run=dry_run,
    )


async def test_a_labelled_jobset_with_jobset_off_is_allowed_with_a_warning_and_an_event() -> None:
    events = Events()
    verdict = await framework_off.reporter(ON, events)(_request(_jobset({c.QUEUE_NAME_LABEL: "q"})))  # type: ignore[arg-type]
    assert verdict.allowed and verdict.patched is None
    [warning] = verdict.warnings
    for part in ("JobSet team-a/js", f"{c.QUEUE_NAME_LABEL}=q", "integrations.frameworks",
                 '"jobset.x-k8s.io/jobset"', "now: batch/job, pod"):
        assert part in warning, part
    [(obj, type_, reason, message)] = events.recorded
    assert (type_, reason, message) == ("Warning", framework_off.REASON, warning)
    # The event is about the object, in the request's namespace.
    assert (obj["metadata"]["namespace"], obj["metadata"]["uid"], obj["kind"]) == ("team-a", "u1", "JobSet")


@pytest.mark.parametrize(
    ("old_labels", "reported"),
    [
        pytest.param({c.QUEUE_NAME_LABEL: "q"}, False, id="label unchanged: told already"),
        pytest.param({}, True, id="label added"),
        pytest.param({c.QUEUE_NAME_LABEL: "other"}, True, id="label changed"),
    ],
)
async def test_updates_report_only_a_new_label(old_labels: dict[str, str], reported: bool) -> None:
    events = Events()
    verdict = await framework_off.reporter(ON, events)(  # type: ignore[arg-type]
        _request(_jobset({c.QUEUE_NAME_LABEL: "q"}), _jobset(old_labels))
    )
    assert verdict.allowed
    assert bool(verdict.warnings) is reported and bool(events.recorded) is reported


async def test_a_dry_run_is_warned_but_records_no_event() -> None:
    events = Events()
    verdict = await framework_off.reporter(ON, events)(  # type: ignore[arg-type]
        _request(_jobset({c.QUEUE_NAME_LABEL: "q"}), dry_run=True)
    )
    assert verdict.warnings and not events.recorded


async def test_an_enabled_kind_is_not_reported() -> None:
    events = Events()
    verdict = await framework_off.reporter([*ON, "jobset.x-k8s.io/jobset"], events)(  # type: ignore[arg-type]
        _request(_jobset({c.QUEUE_NAME_LABEL: "q"}))
    )
    assert verdict.allowed and not verdict.warnings and not events.recorded


def _off_hook(frameworks: list[str]) -> Obj | None:
    _, validating = webhook_configurations(
        namespace_selector=default_managed_namespace_selector("kqueue-system"),
        base_url="https://127.0.0.1:9443",
        frameworks=frameworks,
    )
    hooks = [h for h in validating["webhooks"] if h["name"] == framework_off.NAME]
    return hooks[0] if hooks else None


def test_the_report_is_routed_only_the_off_kinds_and_never_blocks() -> None:
    hook = _off_hook(ON)
    assert hook is not None
    assert hook["failurePolicy"] == "Ignore"
    assert hook["objectSelector"] == {"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]}
    resources = {r for rule in hook["rules"] for r in rule["resources"]}
    assert {
        "jobsets", "mpijobs", "trainjobs", "rayjobs", "rayclusters", "statefulsets", "deployments",
        "leaderworkersets",
    } <= resources
    assert not resources & {"jobs", "pods"}
    on = _off_hook([*ON, "jobset.x-k8s.io/jobset"])
    assert on is not None and "jobsets" not in {r for rule in on["rules"] for r in rule["resources"]}


def test_every_integration_on_routes_no_report() -> None:
    from kqueue.api.config import SUPPORTED_FRAMEWORKS

    assert _off_hook(list(SUPPORTED_FRAMEWORKS)) is None


def test_the_chart_generator_uses_the_same_names() -> None:
    assert (derived.OFF_NAME, derived.OFF_PATH) == (framework_off.NAME, framework_off.VALIDATE_PATH)


def test_only_plain_pods_go_unreported_as_their_declaration_says() -> None:
    # A pod may carry a queue label copied from its owner's template: the owner is reported.
    from kqueue.api.integrations.registry import INTEGRATIONS

    assert [i.framework for i in INTEGRATIONS if not i.reported_when_off] == ["pod"]


async def test_a_child_of_an_enabled_integrations_object_is_not_reported() -> None:
    """A TrainJob's JobSet carries the TrainJob's queue label: it is queued with the TrainJob."""
    events = Events()
    child = _jobset({c.QUEUE_NAME_LABEL: "q"})
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "t", "uid": "t", "controller": True}
    ]
    verdict = await framework_off.reporter([*ON, "trainer.kubeflow.org/trainjob"], events)(_request(child))  # type: ignore[arg-type]
    assert verdict.allowed and not verdict.warnings and not events.recorded
    # With the TrainJob integration off too, the JobSet is reported.
    verdict = await framework_off.reporter(ON, events)(_request(child))  # type: ignore[arg-type]
    assert verdict.warnings and events.recorded
