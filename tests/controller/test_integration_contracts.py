"""One table of contracts, run over every registered integration driven by the generic
reconciler, from its sample (config/samples/): what Kueue's job framework promises for every
kind, checked on the kind's registered webhooks and its ``GenericJob`` (pure: no cluster).

- bad labels are refused naming the field (the Workload is never built);
- resume re-admits it whole: the held object is started with every pod set's admission;
- a running object is not patched again;
- eviction stops the whole object;
- the queue label is immutable while it runs.

Kind-specific cases stay in tests/controller/test_<kind>_integration.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.config import Configuration
from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease
from kqueue.controller.integrations import (
    ComposableJob,
    Framework,
    GenericJob,
    WebhookContext,
    frameworks,
)
from kqueue.controller.webhook_server import AdmissionRequest
from tests.controller.fake_apiserver import merge_patch

Obj = dict[str, Any]

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
PRIORITIES = PriorityClasses.from_objects([], [])
NODE_LABELS = {"contract.kqueue.io/flavor": "on-demand"}
# Every registered framework on, so no object is left to a parent kind it does not have.
CONFIG = Configuration.model_validate(
    {"integrations": {"frameworks": [f.name for f in frameworks()]}}
)


def _generic() -> list[Framework]:
    return [f for f in frameworks() if f.job is not None and f.suspendable]


def _sample(fw: Framework) -> tuple[Obj, list[Obj]]:
    """The kind's object in its sample, and every document of the sample (a runtime it names)."""
    name = fw.kind.lower() + ".yaml"
    docs = [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]
    [obj] = [d for d in docs if d.get("kind") == fw.kind]
    obj["metadata"].setdefault("name", obj["metadata"].get("generateName", "sample-") + "contract")
    obj["metadata"].setdefault("namespace", "default")
    obj["metadata"].setdefault("uid", "uid-contract")
    obj["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), c.QUEUE_NAME_LABEL: "lq"}
    return obj, docs


def _hook(fw: Framework, type_: str) -> Any:
    [hook] = [w for w in fw.webhooks if w.type == type_]
    return hook.handler(WebhookContext(config=CONFIG))


def _request(fw: Framework, obj: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        operation="UPDATE" if old is not None else "CREATE",
        kind={"kind": fw.kind},
        resource={},
        namespace=obj["metadata"]["namespace"],
        name=obj["metadata"]["name"],
        object=obj,
        old_object=old,
    )


class Kind:
    """A kind's sample as the contracts drive it: created (held by kqueue's webhook), its
    Workload, its admission."""

    def __init__(self, fw: Framework) -> None:
        self.fw = fw
        self.job: GenericJob = fw.job()  # type: ignore[misc]
        self.obj, self.docs = _sample(fw)
        decl = fw.declares
        assert decl.build is not None
        inputs = decl.inputs(self.docs) if decl.inputs is not None else {}
        self.build = lambda obj: decl.build(obj, PRIORITIES, **inputs)  # type: ignore[misc]

    async def held(self) -> Obj:
        verdict = await _hook(self.fw, "mutating")(_request(self.fw, copy.deepcopy(self.obj)))
        assert verdict.allowed and verdict.patched is not None, verdict
        return verdict.patched

    def workload(self, obj: Obj) -> Workload:
        return self.build(obj)

    def releases(self, wl: Workload) -> dict[str, PodSetRelease]:
        return {
            ps.name: PodSetRelease(ps.name, ps.count, node_selector=NODE_LABELS)
            for ps in wl.spec.pod_sets
        }

    async def running(self) -> tuple[Obj, Workload]:
        held = await self.held()
        wl = self.workload(held)
        patch = self.job.run_patch(held, wl, self.releases(wl))
        assert patch is not None
        return merge_patch(held, patch), wl


GENERIC = [pytest.param(fw, id=fw.name) for fw in _generic()]


def test_the_table_covers_every_suspendable_kind() -> None:
    # A kind driven by the generic reconciler with a suspend switch cannot be left out.
    assert {fw.kind for fw in _generic()} >= {
        "Job", "JobSet", "MPIJob", "TrainJob", "RayJob", "RayCluster"
    }


@pytest.mark.parametrize("fw", GENERIC)
async def test_bad_labels_are_refused_naming_the_field(fw: Framework) -> None:
    kind = Kind(fw)
    path = f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]"
    obj = copy.deepcopy(kind.obj)
    obj["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = "an hour"
    with pytest.raises(IntegrationError) as err:
        kind.workload(obj)
    assert err.value.path == path
    assert "must be an integer" in err.value.detail


@pytest.mark.parametrize("fw", GENERIC)
async def test_a_held_object_is_resumed_whole_on_admission(fw: Framework) -> None:
    kind = Kind(fw)
    held = await kind.held()
    assert kind.job.is_suspended(held)

    running, wl = await kind.running()

    assert not kind.job.is_suspended(running)
    # Every pod set's admission reaches the object: its flavors' node labels are in the patch.
    text = repr(kind.job.run_patch(held, wl, kind.releases(wl)))
    assert "contract.kqueue.io/flavor" in text
    assert wl.spec.pod_sets and all(ps.count >= 1 for ps in wl.spec.pod_sets)


@pytest.mark.parametrize("fw", GENERIC)
async def test_a_running_object_is_not_patched_again(fw: Framework) -> None:
    kind = Kind(fw)
    running, wl = await kind.running()
    assert kind.job.run_patch(running, wl, kind.releases(wl)) is None


@pytest.mark.parametrize("fw", GENERIC)
async def test_eviction_stops_the_whole_object(fw: Framework) -> None:
    kind = Kind(fw)
    running, wl = await kind.running()

    patch = kind.job.stop_patch(running, wl)

    assert patch is not None
    stopped = merge_patch(running, patch)
    # Suspended as kqueue's (so a user's resume is told apart and re-queued), pods and all.
    assert kind.job.is_suspended(stopped) and not kind.job.user_suspended(stopped)
    assert stopped["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    # Stopped already: nothing more to write.
    assert kind.job.stop_patch(stopped, wl) is None


@pytest.mark.parametrize("fw", GENERIC)
async def test_the_queue_label_is_immutable_while_it_runs(fw: Framework) -> None:
    kind = Kind(fw)
    running, _ = await kind.running()
    moved = copy.deepcopy(running)
    moved["metadata"]["labels"][c.QUEUE_NAME_LABEL] = "elsewhere"

    verdict = await _hook(fw, "validating")(_request(fw, moved, old=running))

    assert not verdict.allowed
    assert f"metadata.labels[{c.QUEUE_NAME_LABEL}]" in [e.field for e in verdict.errors]
    # While it stays suspended (queued, not yet admitted) the queue may change.
    held = await kind.held()
    requeued = copy.deepcopy(held)
    requeued["metadata"]["labels"][c.QUEUE_NAME_LABEL] = "elsewhere"
    assert (await _hook(fw, "validating")(_request(fw, requeued, old=held))).allowed


# -- composed kinds: objects acting as one job (plain pods, pod groups) -----------------------
#
# No suspend switch and no patches: held by the gate, started by the release path, stopped by
# evicting the members (the reconciler's side: tests/controller/test_pod_reconciler.py). The
# table checks what such a kind's ComposableJob promises, from the pod-group sample: one pod of
# it alone is a single pod, all of it is a group.


def _composed() -> list[Framework]:
    return [f for f in frameworks() if f.job is not None and isinstance(f.job(), ComposableJob)]


def _members(fw: Framework, group: bool) -> list[Obj]:
    """The pod-group sample's pods as the webhook leaves them (uids, kqueue's finalizer); the
    first alone, out of its group, when not ``group``."""
    docs = [d for d in yaml.safe_load_all((SAMPLES / "pod-group.yaml").read_text()) if d]
    pods = [d for d in docs if d.get("kind") == fw.kind]
    for i, pod in enumerate(pods):
        pod["metadata"]["uid"] = f"uid-{i}"
        pod["metadata"]["finalizers"] = [c.MANAGED_FINALIZER]
        pod["status"] = {"phase": "Pending"}
    if group:
        return pods
    [solo] = pods[:1]
    solo["metadata"]["labels"].pop(c.POD_GROUP_NAME_LABEL)
    solo["metadata"]["annotations"].pop(c.POD_GROUP_TOTAL_COUNT_ANNOTATION)
    return [solo]


COMPOSED = [
    pytest.param(fw, group, id=f"{fw.name}-{'group' if group else 'single'}")
    for fw in _composed()
    for group in (False, True)
]


def test_the_composed_table_covers_plain_pods() -> None:
    assert {fw.kind for fw in _composed()} == {"Pod"}


@pytest.mark.parametrize(("fw", "group"), COMPOSED)
def test_composed_bad_labels_are_refused_naming_the_field(fw: Framework, group: bool) -> None:
    job = fw.job()  # type: ignore[misc]
    members = _members(fw, group)
    for pod in members:
        pod["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = "an hour"
    with pytest.raises(IntegrationError) as err:
        job.workload_for_members(members, PRIORITIES)
    assert err.value.path == f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]"
    assert "must be an integer" in err.value.detail


@pytest.mark.parametrize(("fw", "group"), COMPOSED)
def test_composed_workload_is_built_from_every_member(fw: Framework, group: bool) -> None:
    job = fw.job()  # type: ignore[misc]
    members = _members(fw, group)
    wl = job.workload_for_members(members, PRIORITIES)
    assert sorted(r.uid for r in wl.metadata.owner_references) == sorted(
        p["metadata"]["uid"] for p in members
    )
    assert sum(ps.count for ps in wl.spec.pod_sets) == len(members)
    assert all(job.member_pod_set(wl, p) in {ps.name for ps in wl.spec.pod_sets} for p in members)


@pytest.mark.parametrize(("fw", "group"), COMPOSED)
def test_composed_object_is_never_patched_to_run_or_stop(fw: Framework, group: bool) -> None:
    # Held by the gate and stopped by evicting its members: the object itself is not patched.
    job = fw.job()  # type: ignore[misc]
    members = _members(fw, group)
    wl = job.workload_for_members(members, PRIORITIES)
    releases = {ps.name: PodSetRelease(ps.name, ps.count) for ps in wl.spec.pod_sets}
    for pod in members:
        assert job.run_patch(pod, wl, releases) is None
        assert job.stop_patch(pod, wl) is None
        assert not job.is_suspended(pod)


@pytest.mark.parametrize(("fw", "group"), COMPOSED)
def test_composed_object_finishes_when_every_member_is_terminal(fw: Framework, group: bool) -> None:
    job = fw.job()  # type: ignore[misc]
    members = _members(fw, group)
    for pod in members:
        pod["status"]["phase"] = "Succeeded"
    assert job.finished_members(members)[0] == c.FINISHED_SUCCEEDED
    members[-1]["status"]["phase"] = "Failed"
    reason, message = job.finished_members(members)
    assert reason == c.FINISHED_FAILED and members[-1]["metadata"]["name"] in message
    # Each member is let go once done: kqueue's finalizer comes off, nothing else changes.
    patch = job.done_patch(members[0])
    assert patch is not None and c.MANAGED_FINALIZER not in patch["metadata"]["finalizers"]
    assert job.done_patch(merge_patch(members[0], patch)) is None
