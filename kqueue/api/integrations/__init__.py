"""Jobs and Pods turned into Workloads: pure functions shared by the controller and the simulator.

``workload_for_job`` (batch/v1 Job), ``workload_for_pod`` (a single v1 Pod) and
``workload_for_pod_group`` (Pods labelled ``kqueue.io/pod-group-name``) build exactly the
Workload kqueue creates, following Kueue's job framework: deterministic names, owner references,
queue name, pod sets, partial admission, priorities through a :class:`PriorityResolver`, the
maximum execution time (``max_exec_time_seconds``).
Which Jobs and Pods kqueue manages at all is ``management.manages`` (not imported here: it
reads the Configuration, whose framework names come from this package's ``registry``).
``preemptibility_labels`` reads back where the owner's and the pods' ``kqueue.io/preemptibility``
labels were put, for the engine's preemptibility chain.
"""

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityClasses,
    PriorityResolver,
    is_managed,
    max_exec_time_seconds,
    preemptibility_labels,
    queue_name,
    workload_name,
)
from kqueue.api.integrations.job import (
    finished_condition,
    is_elastic,
    pods_count,
    workload_for_job,
    workload_name_for_job,
)
from kqueue.api.integrations.pod import (
    group_name,
    group_total_count,
    role_hash,
    workload_for_pod,
    workload_for_pod_group,
)

__all__ = [
    "IntegrationError",
    "PriorityClasses",
    "PriorityResolver",
    "finished_condition",
    "group_name",
    "group_total_count",
    "is_elastic",
    "is_managed",
    "max_exec_time_seconds",
    "pods_count",
    "preemptibility_labels",
    "queue_name",
    "role_hash",
    "workload_for_job",
    "workload_for_pod",
    "workload_for_pod_group",
    "workload_name",
    "workload_name_for_job",
]
