"""Job integrations: the small interface every managed kind implements, and their registry.

As in Kueue's job framework, one generic reconciler (``reconciler.py``) drives every kind
through :class:`Integration`: build the Workload for an object, run it with an admission, stop
it on eviction, tell when it finished. A kind registers itself in :data:`INTEGRATIONS` under
the name users list in ``integrations.frameworks`` of the configuration.
"""

from __future__ import annotations

from collections.abc import Callable

from kqueue.controller.jobs.base import Integration, Management, PodSetRelease
from kqueue.controller.jobs.job import JobIntegration

# Name in ``integrations.frameworks`` -> factory. Plain Pods ("pod") and elastic jobs plug in
# here; the controller skips configured names with no entry yet, with a warning.
INTEGRATIONS: dict[str, Callable[[], Integration]] = {
    "batch/job": JobIntegration,
}

__all__ = ["INTEGRATIONS", "Integration", "JobIntegration", "Management", "PodSetRelease"]
