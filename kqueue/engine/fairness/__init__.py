"""Fair sharing, grouped by concern.

* ``dominant_share``: Kueue's dominant resource share (DRS) of a ClusterQueue or Cohort.
* ``tournament``: under fair sharing, which ClusterQueue's head a cycle considers first.
* ``usage_ledger``: admission fair sharing's decayed usage of each LocalQueue.
* ``admission``: the engine's bookkeeping for admission fair sharing (sampling, entry
  penalties, rollback), which the Engine facade delegates to.
"""
