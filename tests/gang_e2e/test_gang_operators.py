"""Operator-backed kinds placed whole by kube-scheduler: JobSet, MPIJob and TrainJob, with their
real operators on the gang-scheduling control plane.

Each is one kqueue Workload with several pod sets (a JobSet's replicated Jobs, an MPIJob's
launcher and workers, a TrainJob's JobSet), and one PodGroup for the whole workload: kqueue
admits all pod sets or none, so kube-scheduler must place them the same way. The fragmentation
case of test_gang.py for each: quota fits 4 pods, free node capacity 3; nothing is bound, the
Workload says why; one cpu freed, all 4 are bound together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.integrations.jobset import JOBSET_NAME_LABEL
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.integrations.trainjob.generic import CLUSTER_TRAINING_RUNTIMES, TRAINJOBS
from kqueue.controller.resources import PODS, Resource
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, eventually, is_true, stays, unique
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_jobset import JOBSETS, jobset
from tests.controller_e2e.test_mpijob import MPIJOBS, mpijob
from tests.controller_e2e.test_trainjob import runtime, trainjob
from tests.gang_e2e.fragment import (
    GANG_SIZE,
    assert_bound_together,
    assert_gang_unschedulable,
    bound,
    fragmented,
    free_blocker,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
FRAMEWORKS = [
    "batch/job",
    "pod",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/mpijob",
    "trainer.kubeflow.org/trainjob",
]


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster,
    jobset_operator: str,
    mpi_operator: str,
    trainer_operator: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-gang-operators"))
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


@dataclass(frozen=True)
class Kind:
    kind: str
    resource: Resource
    manifest: Callable[[str, str], Obj]
    """(name, namespace) -> the object, 4 pods of 1 cpu in the LocalQueue ``lq``."""
    pod_selector: Callable[[str], str]
    pod_sets: int


def _mpijob(name: str, namespace: str) -> Obj:
    obj = mpijob(name, namespace, "lq", workers=GANG_SIZE - 1)
    # The launcher runs as long as the workers: the case is about placement, not completion.
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]["annotations"] = {}
    return obj


KINDS = [
    Kind(
        "JobSet",
        JOBSETS,
        lambda name, ns: jobset(name, ns, "lq", workers=GANG_SIZE - 1, complete_after=None),
        lambda name: f"{JOBSET_NAME_LABEL}={name}",
        pod_sets=2,
    ),
    Kind(
        "MPIJob",
        MPIJOBS,
        _mpijob,
        lambda name: f"training.kubeflow.org/job-name={name}",
        pod_sets=2,
    ),
]


async def _live(api: Api, namespace: str, selector: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(PODS, namespace=namespace, label_selector=selector)
        if not p["metadata"].get("deletionTimestamp")
    ]


async def _fragmented_case(
    api: Api,
    cluster: LocalCluster,
    namespace: str,
    kind: str,
    create: Callable[[], Any],
    selector: str,
    name: str,
    pod_sets: int,
    group_of: Callable[[Obj], Any] | None = None,
) -> None:
    async with fragmented(cluster, api, namespace) as frag:
        created = await create()
        uid = created["metadata"]["uid"]

        async def admitted() -> Obj | None:
            wl = await api.workload_of(namespace, name, kind=kind)
            return wl if wl is not None and is_true(wl, c.ADMITTED) else None

        wl = await eventually(admitted, within=90, what=f"{kind} {name} admitted")
        assert len(wl["spec"]["podSets"]) == pod_sets

        async def all_pods() -> list[Obj] | None:
            pods = await _live(api, namespace, selector)
            return pods if len(pods) == GANG_SIZE else None

        pods = await eventually(all_pods, within=90, what=f"{GANG_SIZE} pods of {kind} {name}")
        # One group for the whole workload, every pod set in it, named with the object's UID.
        want = await group_of(created) if group_of else gang.group_name(kind, name, uid)
        assert {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in pods} == {want}

        await assert_gang_unschedulable(
            api, namespace, want, wl, lambda: api.workload_of(namespace, name, kind=kind)
        )

        async def none_bound() -> bool:
            return not bound(await _live(api, namespace, selector))

        await stays(none_bound, for_s=3, what=f"no pod of {kind} {name} bound")

        await free_blocker(api, frag)

        async def all_bound() -> list[Obj] | None:
            pods = bound(await _live(api, namespace, selector))
            return pods if len(pods) == GANG_SIZE else None

        assert_bound_together(
            await eventually(all_bound, within=90, what=f"all {GANG_SIZE} pods bound")
        )

        async def placed() -> bool:
            got = await api.workload_of(namespace, name, kind=kind)
            return got is not None and is_true(got, gang.POD_GROUP_SCHEDULED)

        await eventually(placed, what=f"{gang.POD_GROUP_SCHEDULED}=True")


@pytest.mark.parametrize("k", [pytest.param(k, id=k.kind) for k in KINDS])
async def test_operator_workload_binds_nothing_then_all_together(
    api: Api, kqueue: ConfiguredKqueue, cluster: LocalCluster, namespace: str, k: Kind
) -> None:
    name = "gang"

    async def create() -> Obj:
        return await api.kube.create(k.resource, k.manifest(name, namespace), namespace=namespace)

    await _fragmented_case(
        api, cluster, namespace, k.kind, create, k.pod_selector(name), name, k.pod_sets
    )
    await api.kube.delete(k.resource, name, namespace=namespace)


async def test_trainjob_binds_nothing_then_all_together(
    api: Api, kqueue: ConfiguredKqueue, cluster: LocalCluster, namespace: str
) -> None:
    rt = unique("rt")
    await api.kube.create(CLUSTER_TRAINING_RUNTIMES, runtime(rt))
    api.created.append((CLUSTER_TRAINING_RUNTIMES, rt, None))
    name = "gang"

    async def create() -> Obj:
        return await api.kube.create(
            TRAINJOBS, trainjob(name, namespace, "lq", rt, nodes=GANG_SIZE), namespace=namespace
        )

    async def group_of(_tj: Obj) -> str:
        # The Trainer's JobSet (named after the TrainJob) is what the pods belong to; the
        # TrainJob's Workload owns the group.
        js = await api.kube.get(JOBSETS, name, namespace)
        return gang.group_name("JobSet", name, js["metadata"]["uid"])

    await _fragmented_case(
        api,
        cluster,
        namespace,
        "TrainJob",
        create,
        f"{JOBSET_NAME_LABEL}={name}",
        name,
        1,
        group_of,
    )
    await api.kube.delete(TRAINJOBS, name, namespace=namespace)
