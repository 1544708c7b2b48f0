"""The patterns of the generated Configuration schema match exactly what the model's parsers accept.

The schema's patterns stand in for Python code (parse_duration, parse_bind_address); Helm runs
them with Go's regexp. They use only syntax both engines read alike on ASCII text, so Python's
``re`` checks them here against the parsers on generated strings. Helm's own verdicts are
compared with the model in tests/chart/test_values_schema.py.
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from kqueue.api.config import parse_bind_address
from kqueue.api.config_schema import (
    BIND_ADDRESS_PATTERN,
    DURATION_PATTERN,
    POSITIVE_DURATION_PATTERN,
    configuration_json_schema,
    validator_names,
)
from kqueue.api.durations import DurationError, parse_duration

_UNITS = ["ns", "us", "µs", "μs", "ms", "s", "m", "h", "x", ""]
_numbers = st.one_of(
    st.integers(0, 10**6).map(str),
    st.sampled_from(["0", "00", "0.0", ".0", ".5", "1.", "1.25", "0.001", "."]),
)
_durations = st.one_of(
    st.builds(
        lambda sign, parts, pad: pad + sign + "".join(parts) + pad,
        st.sampled_from(["", "+", "-"]),
        st.lists(st.builds(lambda n, u: n + u, _numbers, st.sampled_from(_UNITS)), max_size=3),
        st.sampled_from(["", " "]),
    ),
    st.text(alphabet="0123456789.+-smhnuµ ", max_size=8),
)


def _matches(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


@given(_durations)
@example("0")
@example("24100010000h")
@example("-0")
@example("1ns")
@example("0h5m")
@example(" 5m ")
def test_duration_pattern_is_parse_duration(text: str) -> None:
    try:
        value = parse_duration(text)
        parsed = True
    except DurationError as exc:
        # Sub-microsecond precision and Go's range are the rules left to the controller.
        if "finer than one microsecond" not in str(exc) and "out of range" not in str(exc):
            assert not _matches(DURATION_PATTERN, text), text
            assert not _matches(POSITIVE_DURATION_PATTERN, text), text
            return
        parsed = False
    assert _matches(DURATION_PATTERN, text), text
    # A duration too fine to parse is not zero, so its sign alone decides.
    positive = value.total_seconds() > 0 if parsed else not text.strip().startswith("-")
    assert _matches(POSITIVE_DURATION_PATTERN, text) is positive, text


_addresses = st.one_of(
    st.builds(
        lambda host, port: f"{host}:{port}",
        st.sampled_from(["", "localhost", "127.0.0.1", "[::1]", "[fe80::1]", "a:b", "[x]"]),
        st.one_of(st.integers(0, 70000).map(str), st.sampled_from(["", "00080", "123456"])),
    ),
    st.text(alphabet=":[]0123456789abf.", max_size=10),
)


@given(_addresses)
@example("0")
@example(":65535")
@example(":65536")
def test_bind_address_pattern_is_parse_bind_address(text: str) -> None:
    try:
        parse_bind_address(text)
        valid = True
    except ValueError:
        valid = False
    assert _matches(BIND_ADDRESS_PATTERN, text) is valid, text


def test_schema_has_no_refs_and_forbids_unknown_keys_everywhere() -> None:
    schema = configuration_json_schema()

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            assert "$ref" not in node, path
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, path
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}/{i}")

    walk(schema, "")
    assert schema["additionalProperties"] is False


def test_validator_names_lists_the_models_validators() -> None:
    names = validator_names()
    assert {"Integrations._known", "WaitForPodsReady._positive", "_check_bind_address"} <= names
