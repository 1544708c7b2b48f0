"""Following a gang's binding (``topologyHandOff: Constraint``) without false books.

With ``Constraint`` kqueue books an admitted gang on hosts it chose, but does not pin its pods:
kube-scheduler places the gang in any domain of the required level with room, and once every
pod is bound the assignment follows the binding. The hosts booked for a gang that is admitted
and not bound yet are then only a guess, and a gang that follows its binding can land on hosts
another such gang is booked on (kube-scheduler saw them free: that gang's pods are not there).
Applying the follow alone would count those hosts twice and leave the domain the gang left
looking free, though the other gang's pods can only go there (or to other free room).

The rule (``follow``): the binding is a fact, so it is applied as is. Every host it takes beyond
what the host has is then given back by re-booking, through the TAS placement, the unpinned
gangs booked on it (the caller's ``movable``), against the books with the follow applied: they
land in the room just vacated or in other free room, where kube-scheduler can put them too. A
re-booked gang follows its own binding later, like any other. Re-booking rather than holding
the vacated domain out of the free capacity keeps one record per gang (no phantom hold to
release when the other gang binds, evicts or is deleted) and needs no state beyond the
assignments themselves, which survive a restart in the Workloads' status.

Pinned gangs are never moved: their booking is where their pods are (or will be). A movable
gang that fits nowhere else stays booked where it was: the host then counts more than it has
(too little free room shown, never too much), until one of the two gangs goes or binds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from ..types import FlavorName, PodSetName, TopologyAssignment, WorkloadKey
from ..workload import AdmittedWorkload
from .fit import place_for_rebooking
from .placement import PlacementRequest
from .topology import FlavorTopology, Requests, TopologySnapshot, TopologyUsage, add

Assignments = dict[PodSetName, TopologyAssignment]


def tas_flavor(
    trees: Mapping[FlavorName, FlavorTopology], flavors: Iterable[FlavorName]
) -> FlavorName | None:
    """The flavor whose tree a pod set's assignment is counted in (as ``TopologyUsage``)."""
    return next((f for f in sorted(set(flavors)) if f in trees), None)


def with_assignments(wl: AdmittedWorkload, got: Mapping[PodSetName, TopologyAssignment]) -> (
    AdmittedWorkload
):
    """``wl`` with the pod sets named in ``got`` assigned there."""
    pod_sets = tuple(
        replace(psa, topology=got[psa.name]) if psa.name in got else psa
        for psa in wl.admission.pod_sets
    )
    return replace(wl, admission=replace(wl.admission, pod_sets=pod_sets))


def booked_hosts(trees: Mapping[FlavorName, FlavorTopology], wl: AdmittedWorkload) -> set[
    tuple[FlavorName, str]
]:
    """(flavor, host) of every host ``wl``'s assignments name, on hostname-ended trees."""
    out: set[tuple[FlavorName, str]] = set()
    for psa in wl.admission.pod_sets:
        flavor = tas_flavor(trees, psa.flavors.values())
        if psa.topology is None or flavor is None or not trees[flavor].lowest_is_node:
            continue
        out.update((flavor, values[-1]) for values, _ in psa.topology.domains)
    return out


def overbooked(
    trees: Mapping[FlavorName, FlavorTopology],
    usage: TopologyUsage,
    hosts: Iterable[tuple[FlavorName, str]],
) -> set[tuple[FlavorName, str]]:
    """Of ``hosts``, those whose booked assignments take more of some resource than the host
    has free (its allocatable minus the bound pods not counted through an assignment)."""
    out: set[tuple[FlavorName, str]] = set()
    for flavor, host in hosts:
        leaf = trees[flavor].by_host.get(host)
        if leaf is None:
            continue  # the node is gone: nothing to count twice
        free: Requests = {}
        for node in leaf.nodes:
            add(free, trees[flavor].free[node.name])
        taken = usage.of(flavor, leaf.id)
        if any(v > free.get(r, 0) for r, v in taken.items() if v > 0):
            out.add((flavor, host))
    return out


def rebook(
    trees: Mapping[FlavorName, FlavorTopology], usage: TopologyUsage, wl: AdmittedWorkload
) -> Assignments | None:
    """A new placement of ``wl``'s topology-assigned pod sets against ``usage`` (which must not
    count ``wl``), by the admission's own placement; None when they fit nowhere."""
    by_name = {ps.name: ps for ps in wl.info.pod_sets}
    requests: list[tuple[int, FlavorName, PlacementRequest]] = []
    for i, psa in enumerate(wl.admission.pod_sets):
        flavor = tas_flavor(trees, psa.flavors.values())
        ps = by_name.get(psa.name)
        if psa.topology is None or flavor is None or ps is None or psa.count <= 0:
            continue
        requests.append((i, flavor, PlacementRequest(ps, psa.count)))
    if not requests:
        return None
    outcome = place_for_rebooking(requests, TopologySnapshot(trees, (), usage.copy()))
    return None if outcome.failed is not None else dict(outcome.assignments)


def follow(
    trees: Mapping[FlavorName, FlavorTopology],
    usage: TopologyUsage,
    workloads: Mapping[WorkloadKey, AdmittedWorkload],
    key: WorkloadKey,
    bound: Mapping[PodSetName, TopologyAssignment],
    movable: Callable[[WorkloadKey], bool],
) -> dict[WorkloadKey, Assignments]:
    """The new assignments after ``key``'s pod sets follow their binding to ``bound``: its own,
    and those of the movable gangs re-booked off the hosts the follow overfills (see the module
    docstring). ``usage`` is what ``workloads`` take now (changed in place to the result)."""
    wl = workloads.get(key)
    if wl is None:
        return {}
    followed = with_assignments(wl, bound)
    usage.add_workload(wl, -1)
    usage.add_workload(followed)
    out: dict[WorkloadKey, Assignments] = {key: dict(bound)}
    over = overbooked(trees, usage, booked_hosts(trees, followed))
    for other in sorted(workloads):
        if not over:
            break
        ow = workloads[other]
        if other == key or not (booked_hosts(trees, ow) & over) or not movable(other):
            continue
        usage.add_workload(ow, -1)
        got = rebook(trees, usage, ow)
        if got is None:
            usage.add_workload(ow)  # fits nowhere else: stays where it was booked
            continue
        usage.add_workload(with_assignments(ow, got))
        out[other] = got
        over = overbooked(trees, usage, over)
    return out

