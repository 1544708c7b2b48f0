"""Realistic kqueue.io/v1alpha1 manifests, written with every default filled in, so reading and
writing one gives the same text back."""

from __future__ import annotations

from typing import Any

import yaml

RESOURCE_FLAVOR = """
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata:
  name: spot
  uid: 0b7c5f8e-1111-4e5e-9a4c-7a3a2f0f0001
  resourceVersion: "1234"
  generation: 1
  creationTimestamp: "2024-05-01T12:00:00Z"
  labels:
    tier: spot
  finalizers:
  - kqueue.io/resource-in-use
  managedFields:
  - apiVersion: kqueue.io/v1alpha1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    time: "2024-05-01T12:00:00Z"
spec:
  nodeLabels:
    cloud.example.com/lifecycle: spot
    topology.kubernetes.io/zone: us-east-1a
  nodeTaints:
  - key: cloud.example.com/spot
    value: "true"
    effect: NoSchedule
  tolerations:
  - key: cloud.example.com/spot
    operator: Equal
    value: "true"
    effect: NoSchedule
"""

CLUSTER_QUEUE = """
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata:
  name: team-a
  annotations:
    example.com/owner: team-a@example.com
spec:
  resourceGroups:
  - coveredResources:
    - cpu
    - memory
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: "40"
        borrowingLimit: "10"
      - name: memory
        nominalQuota: 160Gi
        lendingLimit: 64Gi
    - name: spot
      resources:
      - name: cpu
        nominalQuota: 500m
      - name: memory
        nominalQuota: 2Gi
  - coveredResources:
    - example.com/gpu
    flavors:
    - name: a100
      resources:
      - name: example.com/gpu
        nominalQuota: "8"
  cohortName: research
  queueingStrategy: StrictFIFO
  namespaceSelector:
    matchLabels:
      team: a
    matchExpressions:
    - key: environment
      operator: In
      values:
      - prod
      - staging
  flavorFungibility:
    whenCanBorrow: TryNextFlavor
    whenCanPreempt: MayStopSearch
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort:
      policy: LowerPriority
      maxPriorityThreshold: 100
    withinClusterQueue: LowerPriority
    preemptiblePriorityThreshold: 50
    preemptionOrder: Oldest
  stopPolicy: None
status:
  conditions:
  - type: Active
    status: "True"
    observedGeneration: 2
    lastTransitionTime: "2024-05-01T12:00:00Z"
    reason: Ready
    message: Can admit new workloads
  flavorsReservation:
  - name: on-demand
    resources:
    - name: cpu
      total: "42"
      borrowed: "2"
    - name: memory
      total: 8Gi
      borrowed: "0"
  flavorsUsage:
  - name: on-demand
    resources:
    - name: cpu
      total: "42"
      borrowed: "2"
  pendingWorkloads: 3
  reservingWorkloads: 2
  admittedWorkloads: 2
"""

COHORT = """
apiVersion: kqueue.io/v1alpha1
kind: Cohort
metadata:
  name: research
spec:
  parentName: company
  resourceGroups:
  - coveredResources:
    - cpu
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: "100"
        borrowingLimit: "20"
        lendingLimit: "200"
"""

LOCAL_QUEUE = """
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata:
  name: main
  namespace: team-a
spec:
  clusterQueue: team-a
  stopPolicy: Hold
status:
  conditions:
  - type: Active
    status: "True"
    lastTransitionTime: "2024-05-01T12:00:00Z"
    reason: Ready
    message: Can submit new workloads to clusterQueue
  pendingWorkloads: 1
  reservingWorkloads: 1
  admittedWorkloads: 1
  flavorsReservation:
  - name: on-demand
    resources:
    - name: cpu
      total: 1500m
  flavorsUsage:
  - name: on-demand
    resources:
    - name: cpu
      total: 1500m
"""

WORKLOAD_PRIORITY_CLASS = """
apiVersion: kqueue.io/v1alpha1
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
description: Production training runs.
"""

WORKLOAD = """
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata:
  name: job-train-3f2a1
  namespace: team-a
  uid: 5a0e8c0e-2222-4e5e-9a4c-7a3a2f0f0002
  creationTimestamp: "2024-05-01T12:00:05Z"
  labels:
    kqueue.io/queue-name: main
  annotations:
    kqueue.io/job-min-parallelism: "2"
  ownerReferences:
  - apiVersion: batch/v1
    kind: Job
    name: train
    uid: 9d9d9d9d-3333-4e5e-9a4c-7a3a2f0f0003
    controller: true
    blockOwnerDeletion: true
  finalizers:
  - kqueue.io/resource-in-use
spec:
  podSets:
  - name: main
    template:
      metadata:
        labels:
          app: train
      spec:
        containers:
        - name: trainer
          image: registry.example.com/train:1.2
          args:
          - --epochs=3
          resources:
            requests:
              cpu: 1500m
              memory: 4Gi
            limits:
              example.com/gpu: "1"
        initContainers:
        - name: fetch
          image: busybox
          resources:
            requests:
              cpu: "2"
        restartPolicy: Never
        nodeSelector:
          cloud.example.com/lifecycle: spot
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - key: topology.kubernetes.io/zone
                  operator: In
                  values:
                  - us-east-1a
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 1
              preference:
                matchExpressions:
                - key: disk
                  operator: In
                  values:
                  - ssd
        tolerations:
        - key: cloud.example.com/spot
          operator: Exists
          effect: NoSchedule
        priorityClassName: batch
        schedulingGates:
        - name: kqueue.io/admission
    count: 4
    minCount: 2
  queueName: main
  priorityClassRef:
    group: kqueue.io
    kind: WorkloadPriorityClass
    name: high
  priority: 1000
  active: true
  preemptionPriorityClassRef:
    group: kqueue.io
    kind: WorkloadPriorityClass
    name: critical
  preemptionPriority: 5000
  preemptibility: Preemptible
status:
  conditions:
  - type: QuotaReserved
    status: "True"
    lastTransitionTime: "2024-05-01T12:00:10Z"
    reason: QuotaReserved
    message: Quota reserved in ClusterQueue team-a
  - type: Admitted
    status: "True"
    lastTransitionTime: "2024-05-01T12:00:10Z"
    reason: Admitted
    message: The workload is admitted
  admission:
    clusterQueue: team-a
    podSetAssignments:
    - name: main
      flavors:
        cpu: spot
        example.com/gpu: a100
        memory: spot
      resourceUsage:
        cpu: "8"
        example.com/gpu: "4"
        memory: 16Gi
      count: 4
  requeueState:
    count: 1
    requeueAt: "2024-05-01T12:00:00Z"
  reclaimablePods:
  - name: main
    count: 1
"""

ALL: dict[str, str] = {
    "ResourceFlavor": RESOURCE_FLAVOR,
    "ClusterQueue": CLUSTER_QUEUE,
    "Cohort": COHORT,
    "LocalQueue": LOCAL_QUEUE,
    "WorkloadPriorityClass": WORKLOAD_PRIORITY_CLASS,
    "Workload": WORKLOAD,
}


def load(kind: str) -> dict[str, Any]:
    doc = yaml.safe_load(ALL[kind])
    assert isinstance(doc, dict)
    return doc
