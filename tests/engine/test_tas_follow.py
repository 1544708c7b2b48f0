"""Following a gang's binding (``topologyHandOff: Constraint``, kqueue/engine/tas/follow.py):
the books never count a host twice, and never show free room that is not free.

The cluster of tests/controller_e2e/test_topology.py: four racks of four 4-cpu hosts, Jobs of
four 3-cpu pods requiring a rack, 64 cpu of quota."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqueue.engine.engine import Engine
from kqueue.engine.tas.follow import overbooked
from kqueue.engine.types import PodSetName, TopologyAssignment, Workload, WorkloadKey

from .builders import make_cq, t
from .tas_support import (
    HOST,
    RACK,
    TWO,
    Cluster,
    Held,
    node,
    placements,
    pod,
    pset,
    tas_flavor,
    wl,
)

FLAVOR = "tas-default"
MAIN = PodSetName("main")


def _hosts(rack: int, hosts: int = 4) -> list[str]:
    return [f"r{rack}-h{i}" for i in range(hosts)]


def _engine(
    booked: Mapping[str, int], *, racks: int = 4, hosts: int = 4, pods: int = 4, cpu: str = "3"
) -> Engine:
    """``booked``: rack gang name -> the rack it is admitted (booked) in, priority 100."""
    nodes = [
        node(h, cpu="4", labels={RACK: f"r{r}"}) for r in range(racks) for h in _hosts(r, hosts)
    ]
    cq = make_cq("tas-main").quota(FLAVOR, cpu=str(4 * racks * hosts)).preemption(
        within="LowerPriority"
    ).obj()
    held = [
        wl(name, pset("main", pods, required=RACK, cpu=cpu), priority=100, held_in="tas-main",
           held=[Held("main", FLAVOR, [([h], 1) for h in _hosts(rack, hosts)[:pods]])])
        for name, rack in booked.items()
    ]
    return Cluster(nodes, [TWO], [tas_flavor(topo=TWO.name)], [cq], held).engine()


def _on(hosts: Sequence[str]) -> dict[PodSetName, TopologyAssignment]:
    counts: dict[str, int] = {}
    for h in hosts:
        counts[h] = counts.get(h, 0) + 1
    return {MAIN: TopologyAssignment((HOST,), tuple(((h,), n) for h, n in sorted(counts.items())))}


def _racks_booked(engine: Engine) -> dict[str, set[str]]:
    """Workload name -> the racks its assignment's hosts lie in."""
    out: dict[str, set[str]] = {}
    for key in sorted(engine.cache.workloads):
        aw = engine.cache.workloads[key]
        out[key.split("/", 1)[1]] = {
            values[-1].split("-")[0] for psa in aw.admission.pod_sets if psa.topology
            for values, _ in psa.topology.domains
        }
    return out


def _overbooked(engine: Engine) -> set[tuple[str, str]]:
    trees = engine.cache.topology_trees()
    usage = engine.cache.topology_usage()
    hosts = {(f, h) for f, tree in trees.items() for h in tree.by_host}
    return {(str(f), h) for f, h in overbooked(trees, usage, hosts)}


def _high() -> Workload:
    return wl("high", pset("main", 4, required=RACK, cpu="3"), priority=1000, created=5)


FOUR = {"low-0": 0, "low-1": 1, "low-2": 2, "low-3": 3}


def _key(name: str) -> WorkloadKey:
    return WorkloadKey(f"default/{name}")


def _unbound(*names: str) -> Callable[[WorkloadKey], bool]:
    return lambda key: key in {_key(n) for n in names}


def test_four_racks_then_a_fifth_rack_job_preempts_after_two_follows_into_other_gangs_racks() -> (
    None
):
    """The stale books of docs/topology.md: low-0 and low-1 are bound into the racks booked for
    low-2 and low-3 (admitted, not bound yet). The follows re-book low-2 and low-3 into the
    racks just vacated: every rack is counted once, and ``high`` must preempt (one victim)."""
    engine = _engine(FOUR)
    moved = engine.follow_binding(_key("low-0"), _on(_hosts(2)), _unbound("low-2", "low-3"))
    assert set(moved) == {_key("low-0"), _key("low-2")}
    moved = engine.follow_binding(_key("low-1"), _on(_hosts(3)), _unbound("low-2", "low-3"))
    assert set(moved) == {_key("low-1"), _key("low-3")}
    assert _racks_booked(engine) == {
        "low-0": {"r2"}, "low-1": {"r3"}, "low-2": {"r0"}, "low-3": {"r1"}
    }
    assert _overbooked(engine) == set()
    engine.upsert_workload(_high())
    result = engine.schedule(t(10))
    assert placements(result) == {}
    assert len(result.preempted) == 1
    assert [p.preemptor for p in result.preempted] == [_key("high")]
    assert result.preempted[0].victim in {_key(n) for n in FOUR}


def test_without_the_re_booking_the_fifth_is_admitted_into_room_that_does_not_exist() -> None:
    """What the re-booking prevents: the follows applied alone (as the controller wrote them
    before) count racks 2 and 3 twice and show racks 0 and 1 free; ``high`` is admitted with
    no preemption."""
    engine = _engine(FOUR)
    engine.follow_binding(_key("low-0"), _on(_hosts(2)), lambda _: False)
    engine.follow_binding(_key("low-1"), _on(_hosts(3)), lambda _: False)
    assert {h for _, h in _overbooked(engine)} == set(_hosts(2) + _hosts(3))
    engine.upsert_workload(_high())
    result = engine.schedule(t(10))
    assert "high" in placements(result)
    assert result.preempted == ()


def test_a_follow_into_free_room_moves_nobody() -> None:
    engine = _engine({"low-0": 0, "low-1": 1})
    moved = engine.follow_binding(_key("low-0"), _on(_hosts(3)), _unbound("low-1"))
    assert moved == {_key("low-0"): _on(_hosts(3))}
    assert _racks_booked(engine) == {"low-0": {"r3"}, "low-1": {"r1"}}


def test_a_pinned_or_bound_gang_is_never_moved() -> None:
    """Only the caller's movable gangs are re-booked: a pinned gang's booking is where its pods
    are. With none movable the host stays counted twice (too little free room, never too
    much)."""
    engine = _engine({"low-0": 0, "low-2": 2})
    moved = engine.follow_binding(_key("low-0"), _on(_hosts(2)), lambda _: False)
    assert set(moved) == {_key("low-0")}
    assert _racks_booked(engine)["low-2"] == {"r2"}


def test_a_movable_gang_that_fits_nowhere_else_stays_booked() -> None:
    """Two racks, two gangs; a third pod-sized workload took the rack low-0 left (bound pods
    outside kqueue): low-1, displaced, has no rack to go to and stays where it was booked."""
    engine = _engine({"low-0": 0, "low-1": 1}, racks=2)
    for h in _hosts(0):
        engine.upsert_pod(pod(f"default/other-{h}", h, cpu="4"))
    moved = engine.follow_binding(_key("low-0"), _on(_hosts(1)), _unbound("low-1"))
    assert set(moved) == {_key("low-0")}
    assert _racks_booked(engine)["low-1"] == {"r1"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    racks=st.integers(min_value=2, max_value=5),
    pods=st.sampled_from([1, 2, 4]),
    data=st.data(),
)
def test_no_host_is_counted_twice_after_any_sequence_of_follows(
    racks: int, pods: int, data: st.DataObject
) -> None:
    """Gangs of ``pods`` pods of 3 cpu (one per 4-cpu host) requiring a rack, admitted by the
    engine; then, in any order, kube-scheduler binds one unbound gang on any hosts of one rack
    with room for it (hosts no bound gang holds). After every follow no host is counted beyond
    its capacity, every bound gang is booked where it is bound, and every gang stays booked."""
    per_rack = 4 // pods
    gangs = data.draw(st.integers(min_value=1, max_value=racks * per_rack), label="gangs")
    engine = _engine({}, racks=racks)
    for i in range(gangs):
        engine.upsert_workload(wl(f"g{i}", pset("main", pods, required=RACK, cpu="3"),
                                  created=i))
    result = engine.schedule(t(1), admissions=gangs)
    assert len(result.admitted) == gangs
    names = [f"g{i}" for i in range(gangs)]
    actual: dict[str, list[str]] = {}  # bound gang -> its hosts
    while len(actual) < gangs:
        unbound = [n for n in names if n not in actual]
        name = data.draw(st.sampled_from(unbound), label="binds")
        taken = {h for hs in actual.values() for h in hs}
        racks_with_room = [
            r for r in range(racks) if len([h for h in _hosts(r) if h not in taken]) >= pods
        ]
        assert racks_with_room, "the engine admitted more than the racks hold"
        rack = data.draw(st.sampled_from(racks_with_room), label="rack")
        free = [h for h in _hosts(rack) if h not in taken]
        hosts = data.draw(st.permutations(free), label="hosts")[:pods]
        actual[name] = list(hosts)
        engine.follow_binding(_key(name), _on(hosts), _unbound(*unbound))
        assert _overbooked(engine) == set()
        for bound_name, bound_hosts in actual.items():
            aw = engine.cache.workloads[_key(bound_name)]
            assert aw.admission.pod_sets[0].topology == _on(bound_hosts)[MAIN]
        assert len(engine.cache.workloads) == gangs
        for key, aw in engine.cache.workloads.items():
            ta = aw.admission.pod_sets[0].topology
            assert ta is not None and ta.pod_count() == pods, key


def test_a_follow_that_empties_a_rack_lets_a_waiting_rack_job_in() -> None:
    """Half-rack gangs in racks 0 and 1 leave no whole rack free, so a whole-rack Job waits;
    kube-scheduler binds the gang of rack 0 beside the other one, in rack 1. Rack 0 is free
    now: the waiting Job is tried again at once (not when something else changes) and fits."""
    engine = _engine({"half-0": 0, "half-1": 1}, racks=2, pods=2)
    engine.upsert_workload(wl("whole", pset("main", 4, required=RACK, cpu="3"), created=5))
    assert placements(engine.schedule(t(10))) == {}
    engine.follow_binding(_key("half-0"), _on(_hosts(1)[2:]), _unbound())
    assert placements(engine.schedule(t(11))) == {
        "whole": {"main": [((h,), 1) for h in _hosts(0)]}
    }
