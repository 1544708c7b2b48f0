"""MultiKueue: the ``kqueue.io/multikueue`` admission check, its connections to the worker
clusters and its garbage collector (docs/multikueue.md)."""
