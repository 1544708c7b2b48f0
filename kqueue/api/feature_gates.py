"""Kueue's feature gates (``featureGates`` of its Configuration) as kqueue reads them.

Kueue v0.19 switches behaviours on and off by name (pkg/features/kube_features.go). kqueue keeps
the Configuration's ``featureGates`` map with Kueue's names and:

* honours the gates it has a switch for (``HONOURED``, with Kueue v0.19's defaults);
* accepts the gates whose behaviour kqueue always has, when set to that value (``FIXED``);
* warns, naming the gate, about every other one: a gate kqueue has no equivalent for, or a
  ``FIXED`` one set against kqueue's behaviour.

The warnings, and what an honoured gate set against its default changes (:func:`honoured`), are
logged at controller start-up and printed by ``kqueue simulate`` and ``kqueue convert``
(docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

ADMISSION_FAIR_SHARING: Final = "AdmissionFairSharing"
TOPOLOGY_AWARE_SCHEDULING: Final = "TopologyAwareScheduling"
PARTIAL_ADMISSION: Final = "PartialAdmission"
ELASTIC_JOBS_VIA_WORKLOAD_SLICES: Final = "ElasticJobsViaWorkloadSlices"
TAS_FAILED_NODE_REPLACEMENT: Final = "TASFailedNodeReplacement"
TAS_REPLACE_NODE_ON_NODE_TAINTS: Final = "TASReplaceNodeOnNodeTaints"
KUEUE_DRA_INTEGRATION: Final = "KueueDRAIntegration"
KUEUE_DRA_EXTENDED_RESOURCE: Final = "KueueDRAIntegrationExtendedResource"
KUEUE_DRA_PARTITIONABLE_DEVICES: Final = "KueueDRAIntegrationPartitionableDevices"
KUEUE_DRA_REJECT_WHEN_DISABLED: Final = "KueueDRARejectWorkloadsWhenDRADisabled"

# Gates kqueue switches, with Kueue v0.19's default (all beta, on).
HONOURED: Final[Mapping[str, bool]] = {
    ADMISSION_FAIR_SHARING: True,
    TOPOLOGY_AWARE_SCHEDULING: True,
    PARTIAL_ADMISSION: True,
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES: True,
    # Failed-node replacement and tainted nodes (kqueue/controller/node_health.py).
    TAS_FAILED_NODE_REPLACEMENT: True,
    TAS_REPLACE_NODE_ON_NODE_TAINTS: True,
    # DRA quota (docs/dra.md), with resources.deviceClassMappings: claims counted; DRA-backed
    # extended resources counted by their class's mapping; counter sources allowed; with the
    # first off, a workload with claims refused (else its claims take no quota).
    KUEUE_DRA_INTEGRATION: True,
    KUEUE_DRA_EXTENDED_RESOURCE: True,
    KUEUE_DRA_PARTITIONABLE_DEVICES: True,
    KUEUE_DRA_REJECT_WHEN_DISABLED: True,
}

# Gates whose behaviour kqueue always has: the value kqueue behaves as. Setting one to it is
# accepted silently; setting it the other way is warned about (kqueue cannot switch it).
FIXED: Final[Mapping[str, bool]] = {
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "PrioritySortingWithinCohort": True,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "HierarchicalCohorts": True,
    "VisibilityOnDemand": True,
    "ManagedJobsNamespaceSelectorAlwaysRespected": True,
    "TASProfileMixed": True,
    "TASRecomputeAssignmentWithinSchedulingCycle": True,
    "TASMultiLayerTopology": True,
    "TASHandleOverlappingFlavors": True,
    # Failed-node replacement (kqueue/controller/node_health.py): how it is done.
    "TASFailedNodeReplacementFailFast": True,
    "TASReplaceNodeOnPodTermination": True,
    "TASReplaceNodeDueToNotReadyOverFixedTime": False,
    "TASBalancedPlacement": False,
    "TASRespectNodeAffinityPreferred": False,
    "ElasticJobsViaWorkloadSlicesWithTAS": False,
    "SchedulerLibraryIntegration": False,
    "KueueDRAIntegrationConsumableCapacity": False,
    # KEP-9876's gate (alpha and off in Kueue's implementation, kubernetes-sigs/kueue#12996):
    # kqueue always reads preemptionProtection (docs/concepts.md, "Preemption protection").
    "PreemptionProtection": True,
}


# What an honoured gate turned off (against its default) does in kqueue.
OFF_EFFECT: Final[Mapping[str, str]] = {
    ADMISSION_FAIR_SHARING: "admissionFairSharing is ignored",
    TOPOLOGY_AWARE_SCHEDULING: "topology requests and flavors' topologyName are ignored",
    PARTIAL_ADMISSION: "pod sets' minCount is ignored",
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES: (
        "the elastic-job annotation has no effect (a Job is not resized through slices)"
    ),
    TAS_FAILED_NODE_REPLACEMENT: (
        "a failed node under a topology-placed workload is only reported, not replaced"
    ),
    TAS_REPLACE_NODE_ON_NODE_TAINTS: "a node's NoExecute taints do not make it lost",
    KUEUE_DRA_INTEGRATION: "DRA device claims take no quota",
    KUEUE_DRA_EXTENDED_RESOURCE: (
        "an extended resource a DeviceClass serves is counted as a container request under "
        "its own name"
    ),
    KUEUE_DRA_PARTITIONABLE_DEVICES: (
        "counter sources in resources.deviceClassMappings are refused"
    ),
    KUEUE_DRA_REJECT_WHEN_DISABLED: (
        "with KueueDRAIntegration off, a workload's device claims are ignored instead of "
        "making it Misconfigured"
    ),
}


def gate(gates: Mapping[str, bool], name: str) -> bool:
    """Whether the honoured gate ``name`` is on: as set, else Kueue v0.19's default."""
    return gates.get(name, HONOURED[name])


def warnings(gates: Mapping[str, bool]) -> list[str]:
    """One line per gate kqueue does not honour as set, naming it; in the order given."""
    out: list[str] = []
    for name, value in gates.items():
        if name in HONOURED:
            continue
        fixed = FIXED.get(name)
        if fixed is None:
            out.append(f"featureGates.{name}: kqueue has no equivalent of this Kueue feature "
                       "gate; ignored")
        elif fixed != value:
            out.append(
                f"featureGates.{name}: kqueue always behaves as if it were "
                f"{str(fixed).lower()}; {str(value).lower()} ignored"
            )
    return out


def honoured(gates: Mapping[str, bool]) -> list[str]:
    """One line per honoured gate set against Kueue's default, saying what kqueue then does;
    in the order given."""
    out: list[str] = []
    for name, value in gates.items():
        if name not in HONOURED or value == HONOURED[name]:
            continue
        effect = OFF_EFFECT[name]
        if name == KUEUE_DRA_INTEGRATION:
            effect += (
                "; a workload with ResourceClaims is Misconfigured"
                if gate(gates, KUEUE_DRA_REJECT_WHEN_DISABLED)
                else "; a workload's ResourceClaims are ignored"
            )
        out.append(f"featureGates.{name}: {str(value).lower()}, honoured: {effect}")
    return out
