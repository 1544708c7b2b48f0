"""The topology hand-off: what a PodGroup tells kube-scheduler about kqueue's TAS domain.

Kubernetes 1.37's ``scheduling.k8s.io/v1beta1`` PodGroup has ``schedulingConstraints.topology``
(gate ``TopologyAwareWorkloadScheduling``, alpha; immutable): a node label *key*, and
kube-scheduler places all the group's pods in one domain of that level, a domain it picks.
kqueue's TAS picks the domain itself when it admits (it accounts that domain's capacity), so
the two can disagree. ``topologyHandOff`` in the configuration says how they are combined:

* ``NodeSelector``: no constraint; each released pod carries its assigned domain's node
  selector (the hostname with a hostname level), as without the API. kube-scheduler binds
  the gang all or nothing on the nodes kqueue chose.
* ``NodeSelectorAndConstraint``: the same selectors, and the group's constraint key is the
  pod set's required level. Both agree by construction (the pinned nodes lie in one domain of
  that level); kube-scheduler's topology plugin then also checks it.
* ``Constraint``: the constraint only; the pods keep the flavor's node labels but not the
  domain's, and kube-scheduler picks the domain. kqueue still accounts the domain it assigned
  (the pods carry ``kqueue.io/tas`` and count through the assignment), so its books and the
  real placement may name different domains until the workload ends.

The constraint is set only where it says what the admission says: every admitted pod set of
the workload (its one PodGroup) has a ``required`` level, the same one, and either there is
one such pod set or all are of one ``podSetGroupName`` (placed in one domain together).
``preferred`` and ``unconstrained`` requests may spread over domains, so get none.
"""

from __future__ import annotations

from typing import Any, Literal

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError

Obj = dict[str, Any]

TopologyHandOff = Literal["NodeSelector", "NodeSelectorAndConstraint", "Constraint"]
CONSTRAINTS_FIELD = "spec.schedulingConstraints"


def constraint_key(wl: Workload) -> str | None:
    """The level kube-scheduler may be told to keep the workload's gang in, or None."""
    adm = wl.status.admission
    if adm is None or not adm.pod_set_assignments:
        return None
    levels: set[str] = set()
    groups: set[str | None] = set()
    for psa in adm.pod_set_assignments:
        pod_set = wl.pod_set(psa.name)
        if pod_set is None:
            return None
        if (pod_set.template.metadata.annotations or {}).get(
            c.GANG_SCHEDULING_ANNOTATION
        ) == "false":
            continue  # its pods name no group
        request = pod_set.topology_request
        if psa.topology_assignment is None or request is None or not request.required:
            return None
        levels.add(request.required)
        groups.add(request.pod_set_group_name)
    if len(levels) != 1:
        return None
    if len(adm.pod_set_assignments) > 1 and (len(groups) != 1 or None in groups):
        return None
    return levels.pop()


def scheduling_constraints(key: str) -> Obj:
    return {"topology": [{"key": key}]}


def stored_key(group: Obj) -> str | None:
    """The constraint key a PodGroup as stored carries (None: none)."""
    topology = (((group.get("spec") or {}).get("schedulingConstraints") or {}).get("topology")
                or [])
    return str(topology[0].get("key")) if topology and topology[0].get("key") else None


def refuses_constraints(exc: KubeError) -> bool:
    """The API server's answer when ``TopologyAwareWorkloadScheduling`` is off: invalid,
    naming the field."""
    return exc.status == 422 and CONSTRAINTS_FIELD in exc.message
