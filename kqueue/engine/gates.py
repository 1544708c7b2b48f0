"""The Kueue feature gates the engine honours (the Configuration's ``featureGates``).

A gate that is off removes its feature from the engine's inputs, as Kueue ignores the fields the
gate guards: ``TopologyAwareScheduling`` the pod sets' topology requests and the flavors'
``topologyName`` (topology-aware flavors are plain flavors), ``PartialAdmission`` the pod sets'
``minCount``, ``ElasticJobsViaWorkloadSlices`` a slice's ``replacement_for`` (the new slice is
queued as a workload of its own). Kueue v0.19 has all three on by default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kqueue.engine.types import ResourceFlavor, Workload


@dataclass(frozen=True, slots=True)
class FeatureGates:
    topology_aware_scheduling: bool = True
    partial_admission: bool = True
    workload_slices: bool = True

    def flavor(self, flavor: ResourceFlavor) -> ResourceFlavor:
        if self.topology_aware_scheduling or flavor.topology_name is None:
            return flavor
        return replace(flavor, topology_name=None)

    def workload(self, wl: Workload) -> Workload:
        if self.topology_aware_scheduling and self.partial_admission and self.workload_slices:
            return wl
        pod_sets = tuple(
            replace(
                ps,
                topology=ps.topology if self.topology_aware_scheduling else None,
                min_count=ps.min_count if self.partial_admission else None,
            )
            for ps in wl.pod_sets
        )
        return replace(
            wl,
            pod_sets=pod_sets,
            replacement_for=wl.replacement_for if self.workload_slices else None,
        )
