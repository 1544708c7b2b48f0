"""Admission warnings (shown by kubectl) for objects that name a queue: what would keep them from
ever being admitted, said while the user is still looking at the command they ran.

* the queue label names a LocalQueue that does not exist in the namespace (with "did you mean
  user-queue?" when one is close): the workload would wait for it forever;
* Kueue's labels or annotations left on the object, which kqueue ignores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kqueue.api.integrations.management import kueue_key_warnings
from kqueue.api.suggest import did_you_mean
from kqueue.api.v1alpha1 import constants as c

Obj = dict[str, Any]
LocalQueueNames = Callable[[str], list[str] | None]
"""The LocalQueue names of a namespace; None when not known (caches not synced)."""


def queue_warnings(obj: Obj, local_queues: LocalQueueNames, *, kind: str) -> list[str]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace = meta.get("namespace") or "default"
    out: list[str] = []
    name = labels.get(c.QUEUE_NAME_LABEL)
    known = local_queues(namespace) if name else None
    if name and known is not None and name not in known:
        hint = did_you_mean(name, known)
        out.append(
            f"metadata.labels[{c.QUEUE_NAME_LABEL}]: LocalQueue {name!r} does not exist in "
            f"namespace {namespace}"
            + (f"; {hint}" if hint else "")
            + f"; the {kind} waits until it exists"
        )
    out.extend(kueue_key_warnings(obj))
    return out
