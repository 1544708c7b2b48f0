"""Kueue's feature gates (``featureGates`` of its Configuration) as kqueue reads them.

Kueue v0.19 switches behaviours on and off by name (pkg/features/kube_features.go). kqueue keeps
the Configuration's ``featureGates`` map with Kueue's names and:

* honours the gates it has a switch for (``HONOURED``, with Kueue v0.19's defaults);
* accepts the gates whose behaviour kqueue always has, when set to that value (``FIXED``);
* warns, naming the gate, about every other one: a gate kqueue has no equivalent for, or a
  ``FIXED`` one set against kqueue's behaviour.

The warnings are logged at controller start-up and printed by ``kqueue simulate`` and
``kqueue convert`` (docs/configuration.md).
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

# Gates kqueue switches, with Kueue v0.19's default (all beta, on).
HONOURED: Final[Mapping[str, bool]] = {
    ADMISSION_FAIR_SHARING: True,
    TOPOLOGY_AWARE_SCHEDULING: True,
    PARTIAL_ADMISSION: True,
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES: True,
    # Failed-node replacement and tainted nodes (kqueue/controller/node_health.py).
    TAS_FAILED_NODE_REPLACEMENT: True,
    TAS_REPLACE_NODE_ON_NODE_TAINTS: True,
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
    # DRA quota (docs/dra.md): on whenever resources.deviceClassMappings is configured.
    "KueueDRAIntegration": True,
    "KueueDRAIntegrationExtendedResource": True,
    "KueueDRAIntegrationPartitionableDevices": True,
    "KueueDRAIntegrationConsumableCapacity": False,
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
