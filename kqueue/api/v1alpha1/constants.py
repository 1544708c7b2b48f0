"""Names of the kqueue.io/v1alpha1 API that users, scripts and other components depend on.

Every label, annotation, scheduling gate, finalizer, condition type and reason kqueue reads or
writes is defined here once, so a typo is a NameError rather than a silent mismatch. Condition
types and reasons are Kueue's, so tooling written for Kueue reads kqueue's status unchanged.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "kqueue.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
CATEGORY: Final = "kqueue"

# --- Labels, annotations, scheduling gate -----------------------------------------------------

QUEUE_NAME_LABEL: Final = "kqueue.io/queue-name"
PRIORITY_CLASS_LABEL: Final = "kqueue.io/priority-class"
PREEMPTION_PRIORITY_CLASS_LABEL: Final = "kqueue.io/preemption-priority-class"
PREEMPTIBILITY_LABEL: Final = "kqueue.io/preemptibility"
POD_GROUP_NAME_LABEL: Final = "kqueue.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION: Final = "kqueue.io/pod-group-total-count"
# Names the label that holds a grouped pod's rank (Kueue's pod-group-pod-index-label).
POD_GROUP_POD_INDEX_LABEL_ANNOTATION: Final = "kqueue.io/pod-group-pod-index-label"
JOB_MIN_PARALLELISM_ANNOTATION: Final = "kqueue.io/job-min-parallelism"
ELASTIC_JOB_ANNOTATION: Final = "kqueue.io/elastic-job"
WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION: Final = "kqueue.io/workload-slice-replacement-for"
# On a Workload: when its job last saved its progress (RFC 3339), written by the job or a
# sidecar; preemptionOrder LeastWorkLost counts the work a preemption loses from it.
LAST_CHECKPOINT_TIME_ANNOTATION: Final = "kqueue.io/last-checkpoint-time"
# On a top-level object kqueue keeps suspended while its workload is queued (or evicted): the
# suspension is kqueue's, and kqueue resumes the object on admission. A suspended object
# without it was suspended by its user, and stays so until the user resumes it.
SUSPENDED_BY_KQUEUE_ANNOTATION: Final = "kqueue.io/suspended-by-kqueue"
# Marks pods (label, value "true") and holds them (finalizer) while kqueue manages them, as
# Kueue's kueue.x-k8s.io/managed does.
MANAGED_LABEL: Final = "kqueue.io/managed"
# On the pod template of a top-level object whose pods kqueue queues as pods (a Deployment's),
# naming the integration (Kueue's kueue.x-k8s.io/suspended-by-parent): its pods are kqueue's
# although a controller (the ReplicaSet) owns them.
SUSPENDED_BY_PARENT_ANNOTATION: Final = "kqueue.io/suspended-by-parent"
ADMISSION_GATE: Final = "kqueue.io/admission"
# On a job: the Workload it belongs to already exists under this name (Kueue's
# kueue.x-k8s.io/prebuilt-workload-name); kqueue adopts it instead of making one. MultiKueue's
# jobs on a worker carry it, naming the copy of the manager's Workload.
PREBUILT_WORKLOAD_LABEL: Final = "kqueue.io/prebuilt-workload-name"
# On a pod (template): "false" keeps the pod out of gang scheduling (kqueue.controller.gang).
GANG_SCHEDULING_ANNOTATION: Final = "kqueue.io/gang-scheduling"
# Topology requests of a pod set, on its pod template (Kueue's kueue.x-k8s.io/podset-* TAS
# annotations under kqueue.io); they become the pod set's topologyRequest.
PODSET_REQUIRED_TOPOLOGY_ANNOTATION: Final = "kqueue.io/podset-required-topology"
PODSET_PREFERRED_TOPOLOGY_ANNOTATION: Final = "kqueue.io/podset-preferred-topology"
PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: Final = "kqueue.io/podset-unconstrained-topology"
PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: Final = "kqueue.io/podset-slice-required-topology"
PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION: Final = (
    "kqueue.io/podset-slice-required-topology-constraints"
)
PODSET_SLICE_SIZE_ANNOTATION: Final = "kqueue.io/podset-slice-size"
PODSET_GROUP_NAME_ANNOTATION: Final = "kqueue.io/podset-group-name"
# On pods released with a topology assignment (Kueue's kueue.x-k8s.io/tas label): their
# requests are counted through the assignment, not as pods kqueue does not manage.
TAS_LABEL: Final = "kqueue.io/tas"
# Kueue's kueue.x-k8s.io/max-exec-time-seconds: on the top-level object, copied to the Workload's
# spec.maximumExecutionTimeSeconds (a base-10 integer of at least 1).
MAX_EXEC_TIME_SECONDS_LABEL: Final = "kqueue.io/max-exec-time-seconds"

# Values of PREEMPTIBILITY_LABEL (lower-case, as label values conventionally are) and of
# Workload.spec.preemptibility (CamelCase, as enum fields conventionally are).
PREEMPTIBLE_LABEL_VALUE: Final = "preemptible"
NON_PREEMPTIBLE_LABEL_VALUE: Final = "non-preemptible"
PREEMPTIBLE: Final = "Preemptible"
NON_PREEMPTIBLE: Final = "NonPreemptible"
PREEMPTIBILITY_LABEL_VALUES: Final[dict[str, str]] = {
    PREEMPTIBLE_LABEL_VALUE: PREEMPTIBLE,
    NON_PREEMPTIBLE_LABEL_VALUE: NON_PREEMPTIBLE,
}

# --- Finalizers ---------------------------------------------------------------------------------

# On ClusterQueues, ResourceFlavors and Cohorts: not deleted while workloads still use them.
RESOURCE_IN_USE_FINALIZER: Final = "kqueue.io/resource-in-use"
# On pods kqueue manages: kept until kqueue has accounted for the pod's end.
MANAGED_FINALIZER: Final = MANAGED_LABEL

# --- Defaults -------------------------------------------------------------------------------------

DEFAULT_POD_SET_NAME: Final = "main"

# --- Workload condition types -----------------------------------------------------------------

QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
EVICTED: Final = "Evicted"
PREEMPTED: Final = "Preempted"
REQUEUED: Final = "Requeued"
PODS_READY: Final = "PodsReady"
FINISHED: Final = "Finished"
DEACTIVATION_TARGET: Final = "DeactivationTarget"
# kqueue's own: whether every node of an admitted workload's topology assignment can still run
# its pods (False lists the lost ones; status.unhealthyNodes names them too).
TOPOLOGY_NODES_READY: Final = "TopologyNodesReady"
# kqueue's own: whether all of an admitted workload's pods still to be released fit on the nodes'
# free capacity (the node-fit guard; False: held, keeping its quota, the message has the numbers).
NODES_FIT: Final = "NodesFit"
# Its reasons.
NODES_FIT_FITS: Final = "PodsFit"
NODES_FIT_INSUFFICIENT: Final = "InsufficientNodeCapacity"

WORKLOAD_CONDITION_TYPES: Final = (
    QUOTA_RESERVED,
    ADMITTED,
    EVICTED,
    PREEMPTED,
    REQUEUED,
    PODS_READY,
    FINISHED,
    DEACTIVATION_TARGET,
)

# --- Reasons ------------------------------------------------------------------------------------

# Evicted
EVICTED_BY_PREEMPTION: Final = "Preempted"
EVICTED_BY_PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
EVICTED_BY_CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
EVICTED_BY_LOCAL_QUEUE_STOPPED: Final = "LocalQueueStopped"
EVICTED_BY_DEACTIVATION: Final = "Deactivated"
# Kueue's ReasonWithCause(Deactivated, cause): deactivated by kqueue itself, for ``cause``.
EVICTED_BY_DEACTIVATION_DUE_TO: Final = EVICTED_BY_DEACTIVATION + "DueTo"
EVICTED_BY_MAXIMUM_EXECUTION_TIME: Final = (
    EVICTED_BY_DEACTIVATION_DUE_TO + "MaximumExecutionTimeExceeded"
)
EVICTED_REASONS: Final = (
    EVICTED_BY_PREEMPTION,
    EVICTED_BY_PODS_READY_TIMEOUT,
    EVICTED_BY_CLUSTER_QUEUE_STOPPED,
    EVICTED_BY_LOCAL_QUEUE_STOPPED,
    EVICTED_BY_DEACTIVATION,
    EVICTED_BY_MAXIMUM_EXECUTION_TIME,
)

# DeactivationTarget: why kqueue deactivates a workload itself (Kueue's reason and message).
MAXIMUM_EXECUTION_TIME_EXCEEDED: Final = "MaximumExecutionTimeExceeded"
MAXIMUM_EXECUTION_TIME_EXCEEDED_MESSAGE: Final = "exceeding the maximum execution time"

# Preempted
IN_CLUSTER_QUEUE: Final = "InClusterQueue"
IN_COHORT_RECLAMATION: Final = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING: Final = "InCohortFairSharing"
PREEMPTED_REASONS: Final = (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAMATION,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_FAIR_SHARING,
)

# Finished
FINISHED_SUCCEEDED: Final = "Succeeded"
FINISHED_FAILED: Final = "Failed"
WORKLOAD_SLICE_REPLACED: Final = "WorkloadSliceReplaced"

# TopologyNodesReady reasons.
NODE_UNAVAILABLE: Final = "NodeUnavailable"
NODES_READY: Final = "NodesReady"
FINISHED_REASONS: Final = (FINISHED_SUCCEEDED, FINISHED_FAILED, WORKLOAD_SLICE_REPLACED)

# QuotaReserved=False (pending)
NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
WAITING_FOR_QUOTA: Final = "WaitingForQuota"
EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
WAITING_FOR_PREEMPTED_WORKLOADS: Final = "WaitingForPreemptedWorkloads"
MISCONFIGURED: Final = "Misconfigured"
SUSPENDED: Final = "Suspended"
TOPOLOGY_PLACEMENT_FAILED: Final = "TopologyPlacementFailed"
PENDING_REASONS: Final = (
    NO_MATCHING_FLAVOR,
    WAITING_FOR_QUOTA,
    EXCEEDS_MAX_QUOTA,
    WAITING_FOR_PREEMPTED_WORKLOADS,
    MISCONFIGURED,
    SUSPENDED,
    TOPOLOGY_PLACEMENT_FAILED,
)

# QuotaReserved=True / Admitted=True: Kueue's reason for a granted reservation or admission.
QUOTA_RESERVED_REASON: Final = "QuotaReserved"
ADMITTED_REASON: Final = "Admitted"
# Requeued: why a workload went back to its queue (Kueue's reasons).
BACKOFF_FINISHED: Final = "BackoffFinished"
REACTIVATED: Final = "Reactivated"
CLUSTER_QUEUE_RESTARTED: Final = "ClusterQueueRestarted"
LOCAL_QUEUE_RESTARTED: Final = "LocalQueueRestarted"
# PodsReady
WAIT_FOR_START: Final = "WaitForStart"
WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
STARTED: Final = "Started"
RECOVERED: Final = "Recovered"

# --- ClusterQueue / LocalQueue conditions --------------------------------------------------------

ACTIVE: Final = "Active"
CLUSTER_QUEUE_ACTIVE_READY: Final = "Ready"
CLUSTER_QUEUE_ACTIVE_STOPPED: Final = "Stopped"
CLUSTER_QUEUE_ACTIVE_TERMINATING: Final = "Terminating"
CLUSTER_QUEUE_ACTIVE_FLAVOR_NOT_FOUND: Final = "FlavorNotFound"
CLUSTER_QUEUE_ACTIVE_UNKNOWN: Final = "Unknown"
# ClusterQueue condition while spec.admissionScope asks for admission fair sharing (kqueue's;
# Kueue reports nothing): True/Enabled, or False/NotConfigured without the Configuration's
# admissionFairSharing.
ADMISSION_FAIR_SHARING: Final = "AdmissionFairSharing"
ADMISSION_FAIR_SHARING_ENABLED: Final = "Enabled"
ADMISSION_FAIR_SHARING_NOT_CONFIGURED: Final = "NotConfigured"
USAGE_BASED_ADMISSION_FAIR_SHARING: Final = "UsageBasedAdmissionFairSharing"
LOCAL_QUEUE_ACTIVE_READY: Final = "Ready"
LOCAL_QUEUE_ACTIVE_STOPPED: Final = "Stopped"
LOCAL_QUEUE_CLUSTER_QUEUE_DOES_NOT_EXIST: Final = "ClusterQueueDoesNotExist"
LOCAL_QUEUE_CLUSTER_QUEUE_IS_INACTIVE: Final = "ClusterQueueIsInactive"

# Annotations of a Job (copied onto its Workload) whose values become parameters of the
# ProvisioningRequests of its admission checks, the prefix removed (Kueue's
# provreq.kueue.x-k8s.io/, e.g. provreq.kqueue.io/maxRunDurationSeconds).
PROVREQ_ANNOTATION_PREFIX: Final = "provreq.kqueue.io/"

# The controllerName of kqueue's ProvisioningRequest admission check (Kueue's
# kueue.x-k8s.io/provisioning-request): the engine places its topology-aware flavors only once
# the check is Ready (delayed topology requests, docs/topology.md).
PROVISIONING_REQUEST_CONTROLLER: Final = "kqueue.io/provisioning-request"
