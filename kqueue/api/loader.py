"""One loader for every manifest kqueue reads.

Multi-document YAML and ``kind: List`` documents (as ``kubectl get -o yaml`` prints them) are
split into objects; kqueue kinds are validated into models, Kueue kinds are converted first, and
the Kubernetes kinds kqueue understands (Namespace, LimitRange, PriorityClass, Node and the
integrations' kinds, kqueue.api.integrations.registry) are kept as dicts for the integrations,
as the controller would see them: Kueue's labels on a Job stay Kueue's (the controller ignores
them). A bad document raises :class:`LoadError`, whose message names the
source, the document's index, its kind/name and the field path, so a person can find and fix it.

An object with ``metadata.generateName`` and no name (``kubectl create -f`` manifests) gets a
name as the API server would give it, ``generateName`` plus 5 characters, but reproducibly: the
characters come from a hash of the document and of how many identical documents came before it
in the same load (:class:`GeneratedNames`), so the same files always give the same names and
the same manifest given twice gives two objects.

With ``migrate=True`` (``kqueue convert``) Kueue's labels, annotations and scheduling gate are
renamed to kqueue's on every object, and kinds kqueue does not read are kept, so the output can
be applied in place of the input.

Text comes in; reading files is the caller's business (this layer does no I/O).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final

import yaml

from kqueue.api import feature_gates, kueue, kueue_config
from kqueue.api.config import (
    SUPPORTED_FRAMEWORKS,
    Configuration,
    ConfigurationError,
    parse_configuration,
)
from kqueue.api.integrations import registry
from kqueue.api.integrations.declaration import KueueKeys
from kqueue.api.v1alpha1 import KQueueObject, ValidationFailed, parse_object

KQUEUE_API_VERSION: Final = "kqueue.io/v1alpha1"
CONFIGURATION: Final = ("config.kqueue.io/v1alpha1", "Configuration")

# The API server's generated names: generateName (cut to 58 characters) + 5 of these
# (k8s.io/apimachinery's rand.String alphabet: no vowels, no look-alikes).
GENERATED_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX_LENGTH: Final = 5
MAX_GENERATE_NAME_LENGTH: Final = 63 - GENERATED_SUFFIX_LENGTH

# Kubernetes kinds kqueue reads, kept as plain dicts: (apiVersion, kind). Those of the
# integrations (and what their Workloads are built from) come from their declarations.
PASSTHROUGH_KINDS: Final = frozenset(
    {
        ("v1", "Namespace"),
        ("v1", "LimitRange"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
        ("v1", "Node"),
        # Its Jobs are simulated (kqueue.sim.cronjob) and explained.
        ("batch/v1", "CronJob"),
        # Their device requests take quota under resources.deviceClassMappings (docs/dra.md).
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
        # Partitionable devices are counted by the counters their drivers publish, and
        # DeviceClasses narrow which devices a request can get (docs/dra.md).
        ("resource.k8s.io/v1", "ResourceSlice"),
        ("resource.k8s.io/v1", "DeviceClass"),
        *registry.read_kinds(),
    }
)
# How Kueue's keys on an integration's object are read: checked on every load, or only renamed
# by ``kqueue convert``. What a kind's Workloads are built from is read as the kind is.
_KUEUE_KEYS: Final[dict[tuple[str, str], KueueKeys]] = {
    **{r: i.kueue_keys for i in registry.INTEGRATIONS for r in i.reads},
    **{k: i.kueue_keys for k, i in registry.BY_KIND.items()},
}


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
    # The object's generateName when its name was generated (it had none).
    generate_name: str | None = None
    # A config.kqueue.io Configuration document, validated.
    config: Configuration | None = None

    @property
    def display_name(self) -> str:
        """The name, and the generateName it came from (what the person wrote) if generated."""
        if self.generate_name is None:
            return self.name
        return f"{self.name}, generateName {self.generate_name}"

    @property
    def ref(self) -> str:
        name = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if self.generate_name is not None:
            name += f", generateName {self.generate_name}"
        return f"{self.kind} {name}"


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
class GeneratedNames:
    """Reproducible names for objects that only give ``generateName`` (see the module doc).

    Share one across the files of one command so that the same manifest in two files gives two
    names.
    """

    _seen: dict[str, int] = field(default_factory=dict)

    def name_for(self, doc: dict[str, Any], generate_name: str) -> str:
        content = json.dumps(doc, sort_keys=True, default=str)
        digest = hashlib.sha256(content.encode()).hexdigest()
        n = self._seen.get(digest, 0) + 1
        self._seen[digest] = n
        h = hashlib.sha256(f"{digest}\n{n}".encode()).digest()
        suffix = "".join(
            GENERATED_NAME_ALPHABET[b % len(GENERATED_NAME_ALPHABET)]
            for b in h[:GENERATED_SUFFIX_LENGTH]
        )
        return generate_name[:MAX_GENERATE_NAME_LENGTH] + suffix


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


def load_text(
    text: str,
    source: str = "<stdin>",
    *,
    names: GeneratedNames | None = None,
    migrate: bool = False,
) -> LoadResult:
    """Read every object in ``text``; raise :class:`LoadError` on the first bad document.

    ``names`` generates names for ``generateName`` objects (one per call if not given);
    ``migrate`` reads for ``kqueue convert`` (see the module doc).
    """
    result = LoadResult()
    names = names if names is not None else GeneratedNames()
    for location, doc in _documents(text, source):
        loaded = load_object(doc, location, names=names, migrate=migrate)
        if loaded is None:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
            result.skipped.append(
                f"{location}: {api_version} {kind} is not read by kqueue; skipped"
            )
        else:
            result.objects.append(loaded)
    return result


def load_object(
    doc: Any,
    location: Location,
    *,
    names: GeneratedNames | None = None,
    migrate: bool = False,
) -> LoadedObject | None:
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
    if (api_version, kind) == CONFIGURATION:
        return _load_configuration(doc, location)
    if kueue_config.is_kueue_configuration(doc):
        # Kueue's Configuration (written without metadata): kqueue's equivalent.
        try:
            config_doc, config_dropped = kueue_config.from_kueue_configuration(
                doc, SUPPORTED_FRAMEWORKS
            )
        except ValueError as err:
            raise LoadError(location, str(err), kind=kind) from None
        loaded_config = _load_configuration(config_doc, location)
        return replace(
            loaded_config,
            warnings=(
                *(f"{w} (from {api_version})" for w in config_dropped), *loaded_config.warnings
            ),
        )
    if migrate and not _read_by_kqueue(api_version, kind):
        return _load_other(doc, location, api_version, kind, names)
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise LoadError(location, "metadata: required, a mapping with at least a name", kind=kind)
    doc, name, generate_name = _name(doc, metadata, location, kind, names)
    namespace = metadata.get("namespace")
    display = name if generate_name is None else f"{name}, generateName {generate_name}"
    warnings: list[str] = []

    def loaded(model: KQueueObject | None, raw: dict[str, Any]) -> LoadedObject:
        return LoadedObject(
            location,
            str(api_version),
            str(kind),
            name,
            namespace,
            model,
            raw,
            tuple(warnings),
            generate_name,
        )

    from_kueue_doc = kueue.is_kueue(doc)
    if from_kueue_doc:
        try:
            doc, conversion_warnings = kueue.from_kueue(doc)
        except kueue.ShapeError as err:
            raise LoadError(location, err.detail, kind=kind, name=display, path=err.path) from err
        except ValueError as err:
            raise LoadError(location, str(err), kind=kind, name=display) from err
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
            raise LoadError(
                location, detail + more, kind=kind, name=display, path=first.path
            ) from err
        except ValueError as err:
            raise LoadError(location, str(err), kind=kind, name=display) from err
        return loaded(model, doc)

    if (api_version, kind) in PASSTHROUGH_KINDS:
        keys = _KUEUE_KEYS.get((api_version, kind))
        if keys in (KueueKeys.WORKLOAD_OBJECT, KueueKeys.ANY_OBJECT):
            convert = kueue.convert_workload_object if keys is KueueKeys.WORKLOAD_OBJECT else kueue.convert_any_object
            try:
                converted, conversion_warnings = convert(doc)
            except kueue.ShapeError as err:
                raise LoadError(
                    location, err.detail, kind=kind, name=display, path=err.path
                ) from err
            if migrate:
                doc = converted
                warnings.extend(str(w) for w in conversion_warnings)
            # Otherwise the object stays as the controller would see it: Kueue's keys are
            # Kueue's (the conversion above only checked the shapes it relies on).
        elif migrate and keys is KueueKeys.ON_CONVERT:
            try:
                converted, conversion_warnings = kueue.convert_any_object(doc)
            except kueue.ShapeError as err:
                raise LoadError(
                    location, err.detail, kind=kind, name=display, path=err.path
                ) from err
            doc = converted
            warnings.extend(str(w) for w in conversion_warnings)
        return loaded(None, doc)
    return None


def _read_by_kqueue(api_version: str, kind: str) -> bool:
    return (
        api_version == KQUEUE_API_VERSION
        or kueue.is_kueue({"apiVersion": api_version})
        or (api_version, kind) in PASSTHROUGH_KINDS
    )


def _name(
    doc: dict[str, Any],
    metadata: dict[str, Any],
    location: Location,
    kind: str,
    names: GeneratedNames | None,
) -> tuple[dict[str, Any], str, str | None]:
    """``(doc, name, generateName or None)``; a generated name is written into the doc."""
    name = metadata.get("name")
    if isinstance(name, str) and name:
        return doc, name, None
    generate_name = metadata.get("generateName")
    if name is None and isinstance(generate_name, str) and generate_name:
        generated = (names or GeneratedNames()).name_for(doc, generate_name)
        return {**doc, "metadata": {**metadata, "name": generated}}, generated, generate_name
    if name is None and generate_name is not None:
        raise LoadError(
            location,
            f"must be a non-empty string, got {generate_name!r}",
            kind=kind,
            path="metadata.generateName",
        )
    raise LoadError(
        location,
        "required (or metadata.generateName, which kubectl create completes into a name)",
        kind=kind,
        path="metadata.name",
    )


def _load_configuration(doc: dict[str, Any], location: Location) -> LoadedObject:
    """A Configuration document, validated (its model is the ``config``)."""
    try:
        config = parse_configuration(doc, source=str(location))
    except ConfigurationError as err:
        path, message = err.problems[0] if err.problems else ("", str(err))
        more = f" (and {len(err.problems) - 1} more)" if len(err.problems) > 1 else ""
        raise LoadError(
            location, message + more, kind=CONFIGURATION[1], path=path or None
        ) from err
    api_version, kind = CONFIGURATION
    return LoadedObject(
        location, api_version, kind, kind, None, None, doc, config=config,
        warnings=tuple(feature_gates.warnings(config.feature_gates)),
    )


def _load_other(
    doc: dict[str, Any],
    location: Location,
    api_version: str,
    kind: str,
    names: GeneratedNames | None,
) -> LoadedObject | None:
    """A kind kqueue does not read, for ``kqueue convert``: Kueue's keys renamed, else as is.

    Kueue's other API groups (``config.kueue.x-k8s.io``, ``visibility.kueue.x-k8s.io``...) have
    no meaning once converted: they are skipped (None), like kinds kqueue does not read.
    """
    if api_version.split("/", 1)[0].endswith("." + kueue.KUEUE_GROUP):
        return None
    metadata = doc.get("metadata")
    name = kind
    generate_name = None
    namespace = None
    if isinstance(metadata, dict):
        try:
            doc, name, generate_name = _name(doc, metadata, location, kind, names)
        except LoadError:
            name = kind  # a kind kqueue does not read: its own API server judges its name
        namespace = metadata.get("namespace")
    try:
        doc, conversion_warnings = kueue.convert_any_object(doc)
    except kueue.ShapeError as err:
        raise LoadError(location, err.detail, kind=kind, name=name, path=err.path) from err
    return LoadedObject(
        location,
        api_version,
        kind,
        name,
        namespace,
        None,
        doc,
        tuple(str(w) for w in conversion_warnings),
        generate_name,
    )


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
