"""Jobs and Pods turned into Workloads: pure functions shared by the controller and the simulator.

``workload_for_job`` (batch/v1 Job), ``workload_for_pod`` (a single v1 Pod) and
``workload_for_pod_group`` (Pods labelled ``kqueue.io/pod-group-name``) build exactly the
Workload kqueue creates, following Kueue's job framework: deterministic names, owner references,
queue name, pod sets, partial admission, priorities through a :class:`PriorityResolver`.
``manages`` decides which Jobs and Pods kqueue manages at all (see ``management``).
``preemptibility_labels`` reads back where the owner's and the pods' ``kqueue.io/preemptibility``
labels were put, for the engine's preemptibility chain.
"""

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityClasses,
    PriorityResolver,
    is_managed,
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
from kqueue.api.integrations.management import (
    Management,
    ManagementPolicy,
    manages,
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
    "Management",
    "ManagementPolicy",
    "PriorityClasses",
    "PriorityResolver",
    "finished_condition",
    "group_name",
    "group_total_count",
    "is_elastic",
    "is_managed",
    "manages",
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
