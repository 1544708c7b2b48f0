"""One loader for every manifest kqueue reads.

Multi-document YAML and ``kind: List`` documents (as ``kubectl get -o yaml`` prints them) are
split into objects; kqueue kinds are validated into models, Kueue kinds are converted first, and
the Kubernetes kinds kqueue understands (Namespace, PriorityClass, Job, Pod) are kept as dicts for
the integrations. A bad document raises :class:`LoadError`, whose message names the source, the
document's index, its kind/name and the field path, so a person can find and fix it.

Text comes in; reading files is the caller's business (this layer does no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from kqueue.api import kueue
from kqueue.api.v1alpha1 import KQueueObject, ValidationFailed, parse_object

KQUEUE_API_VERSION: Final = "kqueue.io/v1alpha1"

# Kubernetes kinds kqueue reads, kept as plain dicts: (apiVersion, kind).
PASSTHROUGH_KINDS: Final = frozenset(
    {
        ("v1", "Namespace"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
    }
)


@dataclass(frozen=True)
class Location:
    """Where an object came from: file (or ``<stdin>``), document index, item in a List."""

    source: str
    index: int
    item: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}: document {self.index}"
        if self.item is not None:
            where += f" item {self.item}"
        return where


@dataclass(frozen=True)
class LoadedObject:
    """One object read from a manifest: a kqueue model or a Kubernetes dict."""

    location: Location
    api_version: str
    kind: str
    name: str
    namespace: str | None
    model: KQueueObject | None
    raw: dict[str, Any]
    warnings: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else f"{self.kind} {self.name}"
        )


class LoadError(ValueError):
    """A manifest document that cannot be read; the message says where and why."""

    def __init__(
        self,
        location: Location,
        message: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        path: str | None = None,
    ) -> None:
        self.location = location
        self.kind = kind
        self.name = name
        self.path = path
        self.detail = message
        what = f" ({kind} {name})" if kind and name else (f" ({kind})" if kind else "")
        field_part = f"{path}: " if path else ""
        super().__init__(f"{location}{what}: {field_part}{message}")


@dataclass
class LoadResult:
    objects: list[LoadedObject] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        out = [f"{o.location} ({o.ref}): {w}" for o in self.objects for w in o.warnings]
        return out + self.skipped


def _documents(text: str, source: str) -> Iterable[tuple[Location, Any]]:
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        index = text[: mark.index].count("\n---") + 1 if mark is not None else 1
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise LoadError(Location(source, index), f"invalid YAML{where}: {problem}") from err
    index = 0
    for doc in docs:
        if doc is None:  # empty documents between separators are allowed
            continue
        index += 1
        # `kubectl get -o yaml` prints a List; typed lists (ClusterQueueList) come from the API.
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise LoadError(Location(source, index), "items: must be a list of objects")
            for i, item in enumerate(items):
                yield Location(source, index, i), item
        else:
            yield Location(source, index), doc


def load_text(text: str, source: str = "<stdin>") -> LoadResult:
    """Read every object in ``text``; raise :class:`LoadError` on the first bad document."""
    result = LoadResult()
    for location, doc in _documents(text, source):
        loaded = load_object(doc, location)
        if loaded is None:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
            result.skipped.append(
                f"{location}: {api_version} {kind} is not read by kqueue; skipped"
            )
        else:
            result.objects.append(loaded)
    return result


def load_object(doc: Any, location: Location) -> LoadedObject | None:
    """Read one decoded document; None for Kubernetes kinds kqueue does not use."""
    if not isinstance(doc, dict):
        raise LoadError(location, f"expected an object (a mapping), got {type(doc).__name__}")
    api_version = doc.get("apiVersion")
    kind = doc.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise LoadError(
            location, "apiVersion: required", kind=kind if isinstance(kind, str) else None
        )
    if not isinstance(kind, str) or not kind:
        raise LoadError(location, "kind: required")
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise LoadError(location, "metadata: required, a mapping with at least a name", kind=kind)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise LoadError(location, "metadata.name: required", kind=kind)
    namespace = metadata.get("namespace")
    warnings: list[str] = []

    from_kueue_doc = kueue.is_kueue(doc)
    if from_kueue_doc:
        try:
            doc, conversion_warnings = kueue.from_kueue(doc)
        except kueue.ShapeError as err:
            raise LoadError(location, err.detail, kind=kind, name=name, path=err.path) from err
        except ValueError as err:
            raise LoadError(location, str(err), kind=kind, name=name) from err
        warnings.extend(f"{w} (from {api_version})" for w in conversion_warnings)
        api_version = KQUEUE_API_VERSION

    if api_version == KQUEUE_API_VERSION:
        try:
            if from_kueue_doc:
                doc, dropped = _drop_unknown_fields(doc)
                warnings.extend(dropped)
            model = parse_object(doc)
        except ValidationFailed as err:
            first = err.errors[0]
            detail = str(first.message)
            if getattr(first, "allowed", None):
                detail += f" (allowed: {first.allowed})"
            more = f" (and {len(err.errors) - 1} more)" if len(err.errors) > 1 else ""
            raise LoadError(location, detail + more, kind=kind, name=name, path=first.path) from err
        except ValueError as err:
            raise LoadError(location, str(err), kind=kind, name=name) from err
        return LoadedObject(
            location, api_version, kind, name, namespace, model, doc, tuple(warnings)
        )

    if (api_version, kind) in PASSTHROUGH_KINDS:
        if kind in ("Job", "Pod"):
            try:
                doc, conversion_warnings = kueue.convert_workload_object(doc)
            except kueue.ShapeError as err:
                raise LoadError(
                    location, err.detail, kind=kind, name=name, path=err.path
                ) from err
            warnings.extend(str(w) for w in conversion_warnings)
        return LoadedObject(
            location, api_version, kind, name, namespace, None, doc, tuple(warnings)
        )
    return None


_UNKNOWN_FIELD = "unknown field"
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\[([^\]]+)\]")


def _split_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for name, index, key in _PATH_PART.findall(path):
        parts.append(int(index) if index else (name or key))
    return parts


def _drop_unknown_fields(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Remove fields the kqueue models do not know from a converted Kueue object.

    Kueue grows fields faster than kqueue mirrors them; a migration must not fail on them, but
    nobody should lose one silently either, so each is reported. Only unknown-field errors are
    handled here: any other problem still fails the load with its field path.
    """
    warnings: list[str] = []
    for _ in range(8):  # nested unknown fields surface one level at a time
        try:
            parse_object(doc, validate=False)
            return doc, warnings
        except ValidationFailed as err:
            unknown = [e for e in err.errors if e.message == _UNKNOWN_FIELD]
            if not unknown or len(unknown) != len(err.errors):
                return doc, warnings
            for e in unknown:
                parts = _split_path(e.path)
                parent: Any = doc
                try:
                    for part in parts[:-1]:
                        parent = parent[part]
                except (KeyError, IndexError, TypeError):
                    # A key the path syntax cannot spell back ("a.b", "x[0"): the validation
                    # that follows reports it, with its path, as an unknown field.
                    return doc, warnings
                if isinstance(parent, dict):
                    parent.pop(parts[-1], None)
                warnings.append(f"{e.path}: not supported by kqueue; ignored")
    return doc, warnings
