"""Topology-aware scheduling, grouped as Kueue's tas_* files.

* ``topology``: Topologies, nodes and bound pods, and the per-cycle snapshot of free capacity by
  topology domain.
* ``placement``: placing one pod set's pods in the domains of a topology level.
* ``fit``: the cycle's use of both: whether an assignment's pod sets fit, reserving their
  placements, and the placement check the victim search runs.
"""
