"""Which objects kqueue manages, and the queue an unlabelled one goes to.

Kueue's ``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector`` and
LocalQueueDefaulting, shared by every integration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kqueue.api.config import Configuration, LabelSelector

DEFAULT_LOCAL_QUEUE = "default"
"""The LocalQueue a job without a queue label is submitted to, when its namespace has one
(Kueue's LocalQueueDefaulting)."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Management:
    """Which objects kqueue manages: Kueue's ``manageJobsWithoutQueueName`` and
    ``managedJobsNamespaceSelector``.

    An object with a queue label is always managed. One without is managed only with
    ``without_queue_name``, and only in namespaces the selector matches (by default every
    namespace but ``kube-system`` and kqueue's own).
    """

    without_queue_name: bool = False
    namespace_selector: LabelSelector | None = None

    @classmethod
    def from_config(cls, config: Configuration) -> Management:
        return cls(
            without_queue_name=config.manage_jobs_without_queue_name,
            namespace_selector=config.managed_jobs_namespace_selector,
        )

    def manages_unlabelled(self, namespace_labels: Mapping[str, str]) -> bool:
        if not self.without_queue_name:
            return False
        return self.namespace_selector is None or self.namespace_selector.matches(
            namespace_labels
        )
