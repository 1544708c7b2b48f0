"""A TrainJob as the generic reconciler drives it (Kueue's pkg/controller/jobs/trainjob).

One Workload per TrainJob, one pod set per replicated Job of the JobSet its runtime makes
(:mod:`kqueue.api.integrations.trainjob`). A TrainJob waits suspended while queued
(``spec.suspend``, set by the webhook with the annotation ``kqueue.io/suspended-by-kqueue``);
the Trainer creates its JobSet suspended, so there are no pods. kqueue reaches the pods through
the TrainJob's own API for that, an entry of ``spec.runtimePatches`` with manager
``kqueue.io/manager`` (Kueue writes ``kueue.x-k8s.io/manager``): while queued it holds the
``kqueue.io/admission`` gate and the managed label for every replicated Job; on admission the
same entry also carries the flavor's node labels and tolerations, in the patch that resumes the
TrainJob. The Trainer merges runtime patches into the JobSet it builds, so the pods are born
gated and are released by kqueue. On eviction the TrainJob is suspended again (the Trainer
suspends the JobSet, whose Jobs delete their pods) and, once stopped, the entry goes back to the
gate alone.

The JobSet the Trainer creates is controlled by the TrainJob: the JobSet integration never queues
it (its reconciler and webhook skip objects another enabled integration's kind controls).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.jobset import JOBSET_NAME_LABEL, REPLICATED_JOB_NAME_LABEL
from kqueue.api.integrations.trainjob import (
    CLUSTER_RUNTIME_KIND,
    RUNTIME_PATCH_MANAGER,
    TRAINJOB_API_VERSION,
    TRAINJOB_KIND,
    RuntimeLookup,
    finished_condition,
    no_runtimes,
    workload_for_trainjob,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease
from kqueue.controller.informer import Store
from kqueue.controller.integrations.podtemplate import admitted_template_patch, merge
from kqueue.controller.integrations.suspension import SpecSuspendKind
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs")
CLUSTER_TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", namespaced=False
)
TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes")


def _patches(obj: Obj) -> list[Obj]:
    return [p for p in (obj.get("spec") or {}).get("runtimePatches") or [] if isinstance(p, dict)]


def kqueue_patch(obj: Obj) -> Obj | None:
    """kqueue's entry of ``spec.runtimePatches``, if any."""
    return next((p for p in _patches(obj) if p.get("manager") == RUNTIME_PATCH_MANAGER), None)


def _rjob_patches(entry: Obj | None) -> list[Obj]:
    spec = (((entry or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
    return [r for r in spec.get("replicatedJobs") or [] if isinstance(r, dict)]


def _gated(rjob_patch: Obj) -> bool:
    template = ((rjob_patch.get("template") or {}).get("spec") or {}).get("template") or {}
    gates = (template.get("spec") or {}).get("schedulingGates") or []
    return {"name": c.ADMISSION_GATE} in gates


def _entry(per_rjob: Mapping[str, Obj]) -> Obj:
    return {
        "manager": RUNTIME_PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": name, "template": {"spec": {"template": template}}}
                        for name, template in per_rjob.items()
                    ]
                }
            }
        },
    }


def _held_template() -> Obj:
    return {
        "metadata": {"labels": {c.MANAGED_LABEL: "true"}},
        "spec": {"schedulingGates": [{"name": c.ADMISSION_GATE}]},
    }


def _same_entry(current: Obj | None, want: Obj) -> bool:
    # The Trainer's webhook stamps ``time`` on every entry: not part of what kqueue wants.
    if current is None:
        return False
    return {k: v for k, v in current.items() if k != "time"} == want


def _with_entry(obj: Obj, want: Obj) -> list[Obj]:
    """spec.runtimePatches as a merge patch (a list is replaced whole): every other manager's
    entry as it is, kqueue's replaced."""
    others = [p for p in _patches(obj) if p.get("manager") != RUNTIME_PATCH_MANAGER]
    return [*others, want]


class RuntimeStores:
    """The runtimes kqueue's informers hold, as the pure builder's lookup."""

    def __init__(self, cluster: Store[Obj], namespaced: Store[Obj]) -> None:
        self._cluster = cluster
        self._namespaced = namespaced

    def __call__(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        if kind == CLUSTER_RUNTIME_KIND:
            return self._cluster.get(name)
        return self._namespaced.get(f"{namespace or 'default'}/{name}")


class TrainJobIntegration(SpecSuspendKind):
    resource: Resource = TRAINJOBS
    api_version = TRAINJOB_API_VERSION
    kind = TRAINJOB_KIND

    def __init__(self, runtimes: RuntimeLookup = no_runtimes) -> None:
        self.runtimes = runtimes
        """Set by the framework's install to the runtime informers' stores."""

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_trainjob(obj, priorities, runtimes=self.runtimes)

    def is_active(self, obj: Obj) -> bool:
        return any(
            int(s.get("active") or 0) > 0 for s in (obj.get("status") or {}).get("jobsStatus") or []
        )

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        done = finished_condition(obj)
        if done is None:
            return None
        if done[0] == "Complete":
            return c.FINISHED_SUCCEEDED, done[1] or "TrainJob completed"
        return c.FINISHED_FAILED, done[1] or "TrainJob failed"

    def owner_of_pod(self, pod: Obj) -> str | None:
        # The Trainer names the JobSet after the TrainJob; the JobSet controller labels every
        # pod with the JobSet's name.
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(JOBSET_NAME_LABEL)
        return f"{meta.get('namespace') or 'default'}/{name}" if name else None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return str(((pod.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME_LABEL) or "")

    def holds_pods(self, obj: Obj) -> bool:
        rjobs = _rjob_patches(kqueue_patch(obj))
        return bool(rjobs) and all(_gated(r) for r in rjobs)

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        per_rjob: dict[str, Obj] = {}
        for ps in wl.spec.pod_sets:
            template = ps.template.to_dict()
            release = releases.get(ps.name)
            admitted = admitted_template_patch(template, release) if release is not None else None
            held = merge(_held_template(), admitted)
            assert held is not None
            per_rjob[ps.name] = held
        return {
            "metadata": {
                "annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None},
                "resourceVersion": (obj.get("metadata") or {}).get("resourceVersion"),
            },
            # The Trainer's webhook lets runtimePatches change only while the TrainJob is
            # suspended before or after the update: one request resumes and patches.
            "spec": {"suspend": False, "runtimePatches": _with_entry(obj, _entry(per_rjob))},
        }

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        # Only once its Jobs are gone: the Trainer refuses runtimePatches changes while the
        # JobSet still has active Jobs.
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        want = _entry({ps.name: _held_template() for ps in wl.spec.pod_sets})
        if _same_entry(kqueue_patch(obj), want):
            return None
        return {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": {"runtimePatches": _with_entry(obj, want)},
        }
