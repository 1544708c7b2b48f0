"""kqueue: a Kueue-style admission and quota controller for Kubernetes."""

__version__ = "0.1.0"
