"""Building blocks shared by every kqueue.io/v1alpha1 model.

* :class:`KBase`: the pydantic base: camelCase aliases (snake_case names also accepted), strict
  types as the API server has them (``count: "3"`` is an error, not 3), unknown fields rejected
  so a typo is reported rather than silently dropped, and Kubernetes' ``omitempty`` on output.
* Annotated scalar types that carry their own check, error text and CRD schema: names, int32,
  quantities, timestamps. Errors raised here become :class:`~kqueue.api.v1alpha1.errors.FieldError`
  with the field path and what is allowed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    GetJsonSchemaHandler,
    PlainSerializer,
    PlainValidator,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    model_serializer,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from kqueue.api.quantity import ALLOWED_FORMS, Quantity, QuantityError

# --- Base model ------------------------------------------------------------------------------


class KBase(BaseModel):
    """Base of every model: Kubernetes field names and Kubernetes output conventions."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
        frozen=False,
        validate_assignment=False,
        revalidate_instances="never",
        use_attribute_docstrings=False,
    )

    # Fields that are left out of the output when they equal their default, like an empty
    # ``status`` (Kueue's counters are 0, its lists empty: nothing worth printing).
    _omit_if_default: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omitempty(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        # Decided on the serialized values (None stays None, an empty list or dict stays
        # empty), with the per-class plan computed once: this runs for every nested model of
        # every object written, so it must not walk ``model_fields`` each time.
        for name, alias, drop_empty, default in _omit_plan(type(self)):
            value = data.get(alias, _MISSING)
            if value is _MISSING:
                value = data.get(name, _MISSING)
                if value is _MISSING:
                    continue
            if (
                value is None
                or (drop_empty and not value)
                or (default is not _MISSING and getattr(self, name) == default)
            ):
                data.pop(alias, None)
                data.pop(name, None)
        return data

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes JSON/YAML would show it: camelCase, canonical quantities."""
        out = self.model_dump(mode="json", by_alias=True)
        assert isinstance(out, dict)
        return out


_MISSING: Final = object()
# Per model class, per field: (name, alias, whether an empty list/dict is left out, the default
# a field of ``_omit_if_default`` is compared with, else _MISSING). See _omitted_keys.
_OmitPlan = tuple[tuple[str, str, bool, Any], ...]
_OMIT_PLANS: dict[type[KBase], _OmitPlan] = {}


def _omit_plan(cls: type[KBase]) -> _OmitPlan:
    plan = _OMIT_PLANS.get(cls)
    if plan is None:
        entries: list[tuple[str, str, bool, Any]] = []
        for name, field in cls.model_fields.items():
            drop_empty = field.default_factory is list or field.default_factory is dict
            default: Any = _MISSING
            if (
                not drop_empty
                and name in cls._omit_if_default
                and field.default_factory is not None
            ):
                # Made once and only compared with, never handed out.
                default = field.default_factory()  # type: ignore[call-arg]
            entries.append((name, field.alias or name, drop_empty, default))
        plan = _OMIT_PLANS[cls] = tuple(entries)
    return plan


def _omitted_keys(model: KBase) -> list[tuple[str, str]]:
    """Keys that Kubernetes' ``omitempty`` would leave out of ``model``'s JSON."""
    out: list[tuple[str, str]] = []
    cls = type(model)
    for name, field in cls.model_fields.items():
        value = getattr(model, name)
        alias = field.alias or name
        if value is None:
            out.append((name, alias))
        elif field.default_factory is list or field.default_factory is dict:
            if not value:
                out.append((name, alias))
        elif (
            name in cls._omit_if_default
            and field.default_factory is not None
            and value == field.default_factory()  # type: ignore[call-arg]
        ):
            out.append((name, alias))
    return out


def kerror(kind: str, message: str, allowed: str, **context: Any) -> PydanticCustomError:
    """A validation error whose text and ``allowed`` survive into FieldError."""
    return PydanticCustomError(kind, message, {"allowed": allowed, **context})


# --- Names -------------------------------------------------------------------------------------

DNS1123_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN_PATTERN: Final = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_RE: Final = re.compile(DNS1123_LABEL_PATTERN)
_SUBDOMAIN_RE: Final = re.compile(DNS1123_SUBDOMAIN_PATTERN)
# A qualified name (label keys, resource names): [prefix/]name, name <= 63 of [A-Za-z0-9-_.],
# starting and ending alphanumeric; the optional prefix is a DNS subdomain.
_QUALIFIED_NAME_RE: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_ALLOWED: Final = (
    "a lowercase RFC 1123 subdomain: at most 253 characters of a-z, 0-9, '-' and '.', "
    "starting and ending with a letter or digit"
)
LABEL_ALLOWED: Final = (
    "a lowercase RFC 1123 label: at most 63 characters of a-z, 0-9 and '-', "
    "starting and ending with a letter or digit"
)
QUALIFIED_NAME_ALLOWED: Final = (
    "a qualified name: an optional DNS subdomain prefix and '/', then at most 63 characters of "
    "A-Z, a-z, 0-9, '-', '_' and '.', starting and ending with a letter or digit "
    "(e.g. 'cpu', 'example.com/gpu')"
)
LABEL_VALUE_ALLOWED: Final = (
    "empty, or at most 63 characters of A-Z, a-z, 0-9, '-', '_' and '.', "
    "starting and ending with a letter or digit"
)


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and _SUBDOMAIN_RE.match(value) is not None


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and _LABEL_RE.match(value) is not None


def is_qualified_name(value: str) -> bool:
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or not is_dns1123_subdomain(prefix)):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME_RE.match(name) is not None


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE_RE.match(value) is not None


def _check_subdomain(value: str) -> str:
    if not is_dns1123_subdomain(value):
        raise kerror(
            "dns1123_subdomain", "{got} is not a valid name", SUBDOMAIN_ALLOWED, got=repr(value)
        )
    return value


def _check_label(value: str) -> str:
    if not is_dns1123_label(value):
        raise kerror("dns1123_label", "{got} is not a valid name", LABEL_ALLOWED, got=repr(value))
    return value


def _check_qualified_name(value: str) -> str:
    if not is_qualified_name(value):
        raise kerror(
            "qualified_name",
            "{got} is not a valid resource name",
            QUALIFIED_NAME_ALLOWED,
            got=repr(value),
        )
    return value


# A name referring to an object (ClusterQueue, Cohort, ResourceFlavor, LocalQueue...):
# the API server's rule for object names, and Kueue's pattern on its reference types.
Name = Annotated[
    str,
    AfterValidator(_check_subdomain),
    WithJsonSchema({"type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN_PATTERN}),
]
# A pod set name: a DNS label, as container names are.
PodSetName = Annotated[
    str,
    AfterValidator(_check_label),
    WithJsonSchema({"type": "string", "maxLength": 63, "pattern": DNS1123_LABEL_PATTERN}),
]
# A resource name such as cpu, memory or example.com/gpu. Kueue's CRD leaves it a plain string
# and checks it in its webhook; kqueue checks it when reading.
ResourceName = Annotated[
    str,
    AfterValidator(_check_qualified_name),
    WithJsonSchema({"type": "string"}),
]

# --- Integers ----------------------------------------------------------------------------------

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1


def _check_int32(value: int) -> int:
    if not INT32_MIN <= value <= INT32_MAX:
        raise kerror(
            "int32",
            "{got} is out of range",
            f"an integer from {INT32_MIN} to {INT32_MAX}",
            got=value,
        )
    return value


class _Format:
    """Adds an OpenAPI ``format`` to a type's schema, keeping its other constraints."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["format"] = self.fmt
        return out


Int32 = Annotated[int, AfterValidator(_check_int32), _Format("int32")]
Int64 = Annotated[int, _Format("int64")]

# --- Quantities --------------------------------------------------------------------------------

# Kubernetes' own pattern for resource.Quantity in CRDs.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _to_quantity(value: object) -> Quantity:
    try:
        return Quantity.coerce(value)
    except QuantityError:
        raise kerror(
            "quantity", "{got} is not a quantity", ALLOWED_FORMS, got=repr(value)
        ) from None


QuantityValue = Annotated[
    Quantity,
    PlainValidator(_to_quantity),
    PlainSerializer(str, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
# resource name -> quantity, as in a container's requests or a pod set's resourceUsage.
ResourceList = dict[ResourceName, QuantityValue]


def resource_units(resources: dict[str, Quantity]) -> dict[str, int]:
    """A resource list in kqueue's integer units (milli-units for CPU, base units otherwise)."""
    return {name: q.units(name) for name, q in resources.items()}


# --- Timestamps --------------------------------------------------------------------------------

TIME_ALLOWED: Final = "an RFC 3339 timestamp such as 2024-05-01T12:00:00Z"


def _parse_time(value: object) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None and "T" in text.upper():
            return parsed.astimezone(UTC)
    raise kerror("timestamp", "{got} is not a timestamp", TIME_ALLOWED, got=repr(value))


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC, as Kubernetes prints ``metav1.Time``; sub-second digits kept if any."""
    value = value.astimezone(UTC)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0") + "Z"
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


Time = Annotated[
    datetime,
    PlainValidator(_parse_time),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def parse_time(value: str | datetime) -> datetime:
    """Parse an RFC 3339 timestamp the way the models do (UTC, timezone-aware)."""
    return _parse_time(value)
