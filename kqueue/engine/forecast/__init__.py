"""Predicted start times: the engine run forward from the current state (docs/contracts.md §6).

- ``history``: run times of finished workloads per LocalQueue (and pod-set shape), decayed,
  giving a p50 and a p90;
- ``state``: the engine's inputs captured as immutable values, rebuilt into a fresh engine
  elsewhere (another thread) without touching the live one;
- ``forward``: the fresh engine stepped through simulated time, running workloads finishing
  when their remaining run time says, until every pending workload is admitted or cannot be
  predicted.
"""
