"""``kubectl kqueue``: the kubectl plugin (console script ``kubectl-kqueue``).

Listing with positions and reasons, pending workloads in admission order, stopping and resuming
queues and workloads, creating queues and flavors from flags. Kueue's ``kueuectl`` is the
model; flag names are its own where the two overlap.
"""
