"""Preemption, grouped as Kueue's pkg/scheduler/preemption.

* ``seam``: the protocols the cycle and the flavor assigner call (``Preemptor``, the oracle) and
  ``NoPreemption``.
* ``search``: what both victim searches share: their input, the candidate order, the fit check
  and the fill-back that makes a set of victims minimal.
* ``classical``: Kueue's classical victim search; ``fair``: the search under fair sharing.
* ``preemptor``: ``ClassicalPreemptor``, the engine's Preemptor: it picks the search, delays
  new preemptions while victims terminate, and keeps what ``explain`` shows.
* ``report``: what a victim search reports (``VictimSearch``) and the Preempted message figures.
* ``preemptibility``: whether a workload may be preempted at all.

No module here is imported by this ``__init__``: ``workload.py`` needs ``preemptibility`` while
the searches need ``workload.py``.
"""
