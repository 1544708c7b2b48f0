"""Features wired into the manager through its extension points.

The manager, the scheduler and the job reconciler stay generic; what follows plugs into them:

* elastic Jobs (``elastic.py``): a hook on the ``batch/job`` reconciler that picks the slice it
  drives, and a scheduler ``after_cycle`` hook that finishes replaced slices;
* waitForPodsReady (``readiness.py``): a leader task that feeds pod readiness to the engine and
  writes ``PodsReady``, and an ``after_cycle`` hook for what a PodsReady timeout writes;
* plain Pods and pod groups (``jobs/pod.py``): a leader task with its own reconciler and the
  plain-pod webhook, when ``pod`` is in ``integrations.frameworks`` (else that webhook's path
  answers "allowed, unchanged").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kqueue.controller.elastic import ElasticSlices
from kqueue.controller.jobs import pod as plain_pods
from kqueue.controller.readiness import BY_ANY_OWNER, ReadinessWatcher, any_owner_uids
from kqueue.controller.webhook import AdmissionRequest, Verdict

if TYPE_CHECKING:
    from kqueue.controller.manager import Manager

# Frameworks in ``integrations.frameworks`` served here rather than by the generic job reconciler.
EXTENSION_FRAMEWORKS: frozenset[str] = frozenset({plain_pods.FRAMEWORK})


def install(manager: Manager) -> None:
    elastic = ElasticSlices(
        engine=lambda: manager.engine,
        workloads=manager.workloads.store,
        priorities=manager.priority_resolver,
        kube=manager.kube,
        events=manager.events,
        metrics=manager.metrics,
        now=manager._now,
    )
    job_reconciler = manager.job_reconcilers.get("batch/job")
    if job_reconciler is not None:
        job_reconciler.workload_hooks.append(elastic.select)
    manager.scheduler.after_cycle.append(elastic.after_cycle)

    manager.workloads.store.add_index(BY_ANY_OWNER, any_owner_uids)
    readiness = ReadinessWatcher(
        engine=lambda: manager.engine,
        workloads=manager.workloads.store,
        pods=manager.pods.store,
        kube=manager.kube,
        events=manager.events,
        trigger=manager.scheduler.trigger,
        now=manager._now,
    )
    manager.workloads.add_handler(
        on_add=readiness.on_workload,
        on_update=readiness.on_workload,
        on_delete=readiness.on_workload,
    )
    manager.pods.add_handler(on_add=readiness.on_pod, on_update=readiness.on_pod)
    manager.scheduler.after_cycle.append(readiness.after_cycle)
    manager.leader_tasks.append(readiness.run)

    if plain_pods.FRAMEWORK in manager.config.integrations.frameworks:
        manager.pods.store.add_index(plain_pods.BY_GROUP, plain_pods.group_key)
        pods = plain_pods.PodReconciler(
            engine=lambda: manager.engine,
            pods=manager.pods.store,
            workloads=manager.workloads.store,
            flavors=manager.flavors.store,
            priorities=manager.priority_resolver,
            kube=manager.kube,
            events=manager.events,
            now=manager._now,
        )
        manager.pods.add_handler(on_add=pods.on_pod, on_update=pods.on_pod, on_delete=pods.on_pod)
        manager.workloads.add_handler(on_add=pods.on_workload, on_update=pods.on_workload)
        manager.webhook_server.add_mutating(plain_pods.MUTATE_PATH, plain_pods.mutate_plain_pod)
        manager.leader_tasks.append(pods.run)
        manager.workload_runners.append(plain_pods.runs)
    else:
        # A webhook configuration made for the default frameworks still routes plain pods here
        # (and fails closed): answer, leaving them alone, rather than block their creation.
        manager.webhook_server.add_mutating(plain_pods.MUTATE_PATH, _allow)


async def _allow(_req: AdmissionRequest) -> Verdict:
    return Verdict.allow()
