"""JSON Schema of the controller Configuration, generated from the model in :mod:`kqueue.api.config`.

The Helm chart validates its ``config`` value with this schema (``charts/kqueue/values.schema.json``,
written by ``hack/gen-chart-schema.py``), so ``helm install`` refuses what the controller would
refuse when it reads its configuration file, instead of rendering a ConfigMap the controller
crashloops on.

pydantic describes what the model declares: types, enums, bounds, required and unknown keys.
What the model checks in Python code (``field_validator``, ``model_validator`` and the validators
of annotated types) pydantic cannot see, so :data:`VALIDATOR_RULES` gives, per validator, the
JSON Schema constraint that states the same rule, or says why only the controller can check it
(for example a comparison of two durations). A validator that has no entry there makes the
generation fail with a message naming it: a new rule in the model cannot silently be missing
from the chart.

The schema is draft-07 without ``$ref`` (every model is inlined), and its patterns use only
syntax that Go's regexp (Helm's validator) and Python's ``re`` read the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from kqueue.api.config import PREEMPTION_STRATEGY_SETS, SUPPORTED_FRAMEWORKS, Configuration

JsonSchema = dict[str, Any]

_NUMBER: Final = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)"
_NONZERO_NUMBER: Final = r"([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)"
_UNIT: Final = r"(ns|us|µs|μs|ms|s|m|h)"
# A Kubernetes (Go time.ParseDuration) duration, as kqueue.api.durations.parse_duration reads it:
# surrounding blanks are stripped, a sign is allowed, "0" needs no unit.
DURATION_PATTERN: Final = rf"^\s*[-+]?(0|({_NUMBER}{_UNIT})+)\s*$"
# A duration above zero: no minus sign, and some number in it other than zero. Stated as one
# pattern (rather than "not zero"), so that Helm's message shows what is expected.
POSITIVE_DURATION_PATTERN: Final = (
    rf"^\s*\+?({_NUMBER}{_UNIT})*{_NONZERO_NUMBER}{_UNIT}({_NUMBER}{_UNIT})*\s*$"
)

_PORT: Final = r"([0-5]?[0-9]{1,4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
# kqueue.api.config.parse_bind_address: "host:port", ":port", "[v6]:port", or "0" (disabled).
BIND_ADDRESS_PATTERN: Final = rf"^(0|(\[[0-9a-fA-F:.]+\]|[^:\[\]]*):{_PORT})$"
# A namespace name (RFC 1123 label), as Configuration._dns_label checks it.
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


@dataclass(frozen=True)
class ValidatorRule:
    """How the schema follows one validator of the model."""

    constrain: Callable[[JsonSchema], JsonSchema]
    """Returns the schema of the validated value with the validator's rule added."""
    controller_only: str = ""
    """The part of the rule that JSON Schema cannot express, checked only when the controller
    starts; empty when the schema states the whole rule."""


def _unchanged(schema: JsonSchema) -> JsonSchema:
    return schema


def _with(schema: JsonSchema, constraint: JsonSchema) -> JsonSchema:
    """``schema`` and ``constraint`` both hold (merged when their keywords do not overlap)."""
    if set(schema) & set(constraint):
        return {"allOf": [schema, constraint]}
    return {**schema, **constraint}


def _positive_duration(schema: JsonSchema) -> JsonSchema:
    # The duration's string schema, alone or as the non-null branch of an optional duration.
    if schema.get("pattern") == DURATION_PATTERN:
        return {**schema, "pattern": POSITIVE_DURATION_PATTERN}
    if "anyOf" in schema:
        branches = [b if b == {"type": "null"} else _positive_duration(b) for b in schema["anyOf"]]
        return {**schema, "anyOf": branches}
    raise UnmappedValidatorError(
        f"a positive-duration rule on a field that is not a duration: {schema}"
    )


def _known_frameworks(schema: JsonSchema) -> JsonSchema:
    items = {**schema.get("items", {}), "enum": list(SUPPORTED_FRAMEWORKS)}
    return {**schema, "items": items, "uniqueItems": True}


def _preemption_strategy_sets(schema: JsonSchema) -> JsonSchema:
    # Only Kueue's three lists, in their order: an enum of whole lists says exactly that.
    return _with(schema, {"enum": [list(s) for s in PREEMPTION_STRATEGY_SETS]})


def _selector_values(schema: JsonSchema) -> JsonSchema:
    def operator_in(*operators: str) -> JsonSchema:
        return {"properties": {"operator": {"enum": list(operators)}}, "required": ["operator"]}

    rules = [
        {
            "if": operator_in("In", "NotIn"),
            "then": {"properties": {"values": {"minItems": 1}}, "required": ["values"]},
        },
        {
            "if": operator_in("Exists", "DoesNotExist"),
            "then": {"properties": {"values": {"maxItems": 0}}},
        },
    ]
    return _with(schema, {"allOf": rules})


# A non-negative decimal number, as kqueue.api.config._weight_input reads it (text or number).
WEIGHT_PATTERN: Final = r"^\s*\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
# A duration not below zero: no minus sign.
NON_NEGATIVE_DURATION_PATTERN: Final = rf"^\s*\+?(0|({_NUMBER}{_UNIT})+)\s*$"


def _resource_weight(schema: JsonSchema) -> JsonSchema:
    # YAML gives a number or a string; either must be a non-negative decimal.
    return {
        "anyOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": WEIGHT_PATTERN},
        ]
    }


def _quantities_by_name(schema: JsonSchema) -> JsonSchema:
    # YAML gives a number or a string; the controller parses each as a quantity.
    return {**schema, "additionalProperties": {"type": ["string", "number"]}}


def _non_negative_duration(schema: JsonSchema) -> JsonSchema:
    if schema.get("pattern") == DURATION_PATTERN:
        return {**schema, "pattern": NON_NEGATIVE_DURATION_PATTERN}
    raise UnmappedValidatorError(
        f"a non-negative-duration rule on a field that is not a duration: {schema}"
    )


def _burst_with_qps(schema: JsonSchema) -> JsonSchema:
    # qps defaults to 300, so burst must be >= 1 unless qps is given and <= 0.
    return _with(
        schema,
        {
            "if": {"properties": {"qps": {"maximum": 0}}, "required": ["qps"]},
            "else": {"properties": {"burst": {"minimum": 1}}},
        },
    )


def _pattern(pattern: str) -> Callable[[JsonSchema], JsonSchema]:
    return lambda schema: _with(schema, {"pattern": pattern})


# Keyed by the validator function's __qualname__.
VALIDATOR_RULES: Final[Mapping[str, ValidatorRule]] = {
    "_duration_input": ValidatorRule(
        # The string form itself is the timedelta schema (_Generator.timedelta_schema).
        _unchanged,
        controller_only=(
            "durations finer than one microsecond (such as 1ns), or longer than Go's limit "
            "(about 292 years), are refused"
        ),
    ),
    "_check_bind_address": ValidatorRule(_pattern(BIND_ADDRESS_PATTERN)),
    "Configuration._dns_label": ValidatorRule(_pattern(DNS_LABEL_PATTERN)),
    # Fills in managedJobsNamespaceSelector's default from namespace; checks nothing.
    "Configuration._namespace_defaults": ValidatorRule(_unchanged),
    # Drops admissionFairSharing when its feature gate is off; checks nothing.
    "Configuration._gated_sections": ValidatorRule(_unchanged),
    "Configuration._counter_sources_gated": ValidatorRule(
        _unchanged,
        controller_only=(
            "resources.deviceClassMappings[].sources: none while featureGates."
            "KueueDRAIntegrationPartitionableDevices is false"
        ),
    ),
    "LeaderElection._check_timings": ValidatorRule(
        _unchanged,
        controller_only=(
            "leaderElection: leaseDuration a whole number of seconds, renewDeadline shorter than "
            "leaseDuration and longer than 1.2 x retryPeriod, retryPeriod positive"
        ),
    ),
    "ClientConnection._check_burst": ValidatorRule(_burst_with_qps),
    "DeviceClassMapping._check_names": ValidatorRule(
        _unchanged,
        controller_only=(
            "resources.deviceClassMappings[]: name and each of 1 to 8 deviceClassNames "
            "qualified names, no DeviceClass twice"
        ),
    ),
    "Resources._check_mappings": ValidatorRule(
        _unchanged,
        controller_only=(
            "resources.deviceClassMappings: at most 16, no name twice, a DeviceClass in one "
            "mapping only (or in several that each count their own counter)"
        ),
    ),
    "ResourceTransformation._numbers_as_quantities": ValidatorRule(_quantities_by_name),
    "ResourceTransformation._check": ValidatorRule(
        _unchanged,
        controller_only=(
            "resources.transformations[]: input, multiplyBy and output names qualified names, "
            "each output a quantity"
        ),
    ),
    "Resources._check_transformations": ValidatorRule(
        _unchanged,
        controller_only="resources.transformations: no input twice",
    ),
    "DeviceClassCounterSource._check": ValidatorRule(
        _unchanged,
        controller_only=(
            "resources.deviceClassMappings[].sources[].counter: name a DNS label, driver a "
            "DNS subdomain of at most 63 characters, a deviceSelector CEL expression"
        ),
    ),
    "RequeuingStrategy._check_backoff": ValidatorRule(
        _unchanged,
        controller_only=(
            "waitForPodsReady.requeuingStrategy: backoffMaxSeconds >= backoffBaseSeconds"
        ),
    ),
    "WaitForPodsReady._positive": ValidatorRule(_positive_duration),
    "Integrations._known": ValidatorRule(_known_frameworks),
    "FairSharing._supported_set": ValidatorRule(_preemption_strategy_sets),
    "_weight_input": ValidatorRule(_resource_weight),
    "AdmissionFairSharing._not_negative": ValidatorRule(_non_negative_duration),
    "AdmissionFairSharing._positive_interval": ValidatorRule(_positive_duration),
    "MinAdmitDuration._not_negative": ValidatorRule(_non_negative_duration),
    "LabelSelectorRequirement._check_values": ValidatorRule(_selector_values),
    "PredictedStart._positive": ValidatorRule(_positive_duration),
    "IncrementalDispatcherConfig._positive": ValidatorRule(_positive_duration),
    "MultiKueue._not_negative": ValidatorRule(_non_negative_duration),
    "MultiKueue._label_value": ValidatorRule(
        _pattern(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
    ),
}


class UnmappedValidatorError(Exception):
    """The model has a validator that VALIDATOR_RULES does not describe."""


def _validator_name(schema: Any) -> str:
    function = schema["function"]["function"]
    return str(getattr(function, "__qualname__", repr(function)))


class _Generator(GenerateJsonSchema):
    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        # Configuration durations are Go duration strings (the Duration type), not ISO 8601.
        return {"type": "string", "pattern": DURATION_PATTERN}

    def _rule(self, schema: Any, inner: JsonSchemaValue) -> JsonSchemaValue:
        name = _validator_name(schema)
        rule = VALIDATOR_RULES.get(name)
        if rule is None:
            raise UnmappedValidatorError(
                f"validator {name} of the Configuration model has no entry in "
                "kqueue/api/config_schema.py VALIDATOR_RULES: add the JSON Schema constraint "
                "that states its rule (or, if JSON Schema cannot, say so in controller_only), "
                "then run `make config-docs`"
            )
        return rule.constrain(inner)

    def function_after_schema(self, schema: core_schema.AfterValidatorFunctionSchema) -> Any:
        return self._rule(schema, super().function_after_schema(schema))

    def function_before_schema(self, schema: core_schema.BeforeValidatorFunctionSchema) -> Any:
        return self._rule(schema, super().function_before_schema(schema))

    def function_wrap_schema(self, schema: core_schema.WrapValidatorFunctionSchema) -> Any:
        return self._rule(schema, super().function_wrap_schema(schema))

    def function_plain_schema(self, schema: core_schema.PlainValidatorFunctionSchema) -> Any:
        return self._rule(schema, super().function_plain_schema(schema))


# Keyword order in the written file: what a reader looks for first.
_KEY_ORDER: Final = (
    "description",
    "type",
    "const",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "uniqueItems",
    "items",
    "properties",
    "additionalProperties",
    "required",
    "anyOf",
    "allOf",
    "if",
    "then",
    "else",
    "not",
)
_DROPPED: Final = frozenset({"title", "default"})


def _description(text: str) -> str:
    return " ".join(text.replace("``", "`").split())


def _tidy(node: Any, defs: Mapping[str, Any]) -> Any:
    """Inline ``$ref``s, drop titles and defaults, order keywords."""
    if isinstance(node, list):
        return [_tidy(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = _tidy(defs[node["$ref"].removeprefix("#/$defs/")], defs)
        rest = _tidy({k: v for k, v in node.items() if k != "$ref"}, defs)
        # A field's own description wins over the model's.
        return _tidy({**target, **rest}, defs) if rest else target
    out: JsonSchema = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            out[key] = {name: _tidy(sub, defs) for name, sub in value.items()}
        elif key == "description":
            out[key] = _description(value)
        else:
            out[key] = _tidy(value, defs)
    rank = {key: i for i, key in enumerate(_KEY_ORDER)}
    return dict(sorted(out.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def configuration_json_schema(model: type[BaseModel] = Configuration) -> JsonSchema:
    """The draft-07 JSON Schema of a Configuration document (camelCase keys, no ``$ref``).

    Raises :class:`UnmappedValidatorError` when the model has a validator that
    :data:`VALIDATOR_RULES` does not describe.
    """
    raw = model.model_json_schema(by_alias=True, schema_generator=_Generator)
    defs = raw.pop("$defs", {})
    schema: JsonSchema = _tidy(raw, defs)
    return schema


def validator_names(model: type[BaseModel] = Configuration) -> set[str]:
    """The validators of the model, as VALIDATOR_RULES names them."""
    seen: set[str] = set()

    class _Collect(_Generator):
        def _rule(self, schema: Any, inner: JsonSchemaValue) -> JsonSchemaValue:
            seen.add(_validator_name(schema))
            return inner

    model.model_json_schema(by_alias=True, schema_generator=_Collect)
    return seen


def controller_only_rules() -> list[str]:
    """The rules of the model the schema cannot state, checked when the controller starts."""
    return [rule.controller_only for rule in VALIDATOR_RULES.values() if rule.controller_only]
