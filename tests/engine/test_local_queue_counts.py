"""Pending counts per LocalQueue (the LocalQueue metrics' source) add up to their ClusterQueue's.

Property: whatever workloads arrive in whichever LocalQueues (one of them stopped), through any
number of cycles, the (active, parked) counts of a ClusterQueue's LocalQueues sum to the
ClusterQueue's own counts, and a stopped LocalQueue counts nothing (its workloads wait aside).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.engine.types import ClusterQueueName, local_queue_key

from .builders import make_cq, make_engine, make_flavor, make_lq, make_workload, t

# LocalQueue -> ClusterQueue; "held" is stopped.
LOCAL_QUEUES = {"lq-a1": "a", "lq-a2": "a", "lq-b": "b", "held": "b"}

arrivals = st.lists(
    st.tuples(st.sampled_from(sorted(LOCAL_QUEUES)), st.integers(min_value=1, max_value=5)),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(arrivals=arrivals, cycles=st.integers(min_value=0, max_value=6), strict=st.booleans())
def test_local_queue_counts_add_up_to_their_cluster_queue(
    arrivals: list[tuple[str, int]], cycles: int, strict: bool
) -> None:
    cqs = []
    for name in ("a", "b"):
        b = make_cq(name).quota("default", cpu="4")
        cqs.append((b.strict_fifo() if strict else b).obj())
    lqs = [
        make_lq(lq, cq, stop="Hold" if lq == "held" else "None") for lq, cq in LOCAL_QUEUES.items()
    ]
    engine = make_engine(make_flavor("default").obj(), *cqs, *lqs)
    for i, (lq, cpu) in enumerate(arrivals):
        engine.upsert_workload(
            make_workload(f"w{i}").queue(lq).created(i).request("cpu", str(cpu)).obj()
        )
    for n in range(cycles):
        engine.schedule(t(100 + n))
    for cq in ("a", "b"):
        per_lq = [
            engine.local_queue_pending_counts(local_queue_key("default", lq))
            for lq, owner in LOCAL_QUEUES.items()
            if owner == cq
        ]
        total = engine.pending_counts(ClusterQueueName(cq))
        assert (sum(a for a, _ in per_lq), sum(p for _, p in per_lq)) == total
    assert engine.local_queue_pending_counts(local_queue_key("default", "held")) == (0, 0)
