"""Reading Workloads from watch events without re-reading specs that did not change.

Most Workload events change only the status (an admission, a pending reason, a finish): the
spec, with its pod templates, is the larger part of the object and the dearer part to read into
the models. :class:`WorkloadReader` is the Workload informer's converter: it remembers, per
Workload, the UID and the JSON text's hash of the spec it last read, and when an event carries
the same spec it reuses that spec's model (already read and checked) and reads only metadata
and status. The result is the model a full read gives: the same JSON gives the same model, and a
spec whose JSON text differs in any way is read in full.

It decides on the spec's content, not on ``metadata.generation``: a fake API server in tests, or
a client writing a spec through another path, cannot make it keep a stale spec.
"""

from __future__ import annotations

import json
from typing import Any

from kqueue.api.v1alpha1 import Workload, WorkloadSpec, parse_object
from kqueue.controller.resources import object_key

Obj = dict[str, Any]


class WorkloadReader:
    """Converter of Workload dicts to models for the informer; call :meth:`forget` on deletes."""

    def __init__(self) -> None:
        # key -> (uid, hash of the spec's JSON text, the spec read from it)
        self._specs: dict[str, tuple[str | None, int, WorkloadSpec]] = {}
        self.reused = 0
        """Events whose spec was reused (for tests and benchmarks)."""

    def __call__(self, doc: Obj) -> Workload:
        spec = doc.get("spec") if isinstance(doc, dict) else None
        if not isinstance(spec, dict):
            return _full(doc)
        key = object_key(doc)
        uid = (doc.get("metadata") or {}).get("uid")
        # Key order is part of the text: a reordered but equal spec is read in full, which is
        # only slower, never different.
        text_hash = hash(json.dumps(spec, separators=(",", ":")))
        known = self._specs.get(key)
        wl: Workload | None = None
        if known is not None and known[0] == uid and known[1] == text_hash:
            try:
                # The model instance is accepted as it is (revalidate_instances="never"): only
                # apiVersion, kind, metadata and status are read.
                wl = Workload.model_validate({**doc, "spec": known[2]})
                self.reused += 1
            except ValueError:
                wl = None  # read in full below, for parse_object's error naming the field
        if wl is None:
            wl = _full(doc)
        self._specs[key] = (uid, text_hash, wl.spec)
        return wl

    def forget(self, key: str) -> None:
        """The Workload is gone from the store: its spec need not be remembered."""
        self._specs.pop(key, None)

    def __len__(self) -> int:
        return len(self._specs)


def _full(doc: Obj) -> Workload:
    # Objects in the API passed the webhook and the schema: only the types are read here.
    obj = parse_object(doc, validate=False)
    if not isinstance(obj, Workload):
        raise TypeError(f"expected a Workload, got {type(obj).__name__}")
    return obj
