"""kube.loads (pydantic-core's parser, json.loads as the fallback) decodes exactly as json.loads,
and fails where it fails."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.controller.kube import loads

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.booleans())
def test_decodes_as_json_loads(value: Any, as_bytes: bool) -> None:
    text = json.dumps(value)
    raw: bytes | str = text.encode() if as_bytes else text
    assert loads(raw) == json.loads(raw)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'"\\ud800"', id="lone surrogate (json.loads reads it)"),
        pytest.param(b'{"a": NaN}', id="NaN literal"),
        pytest.param(b'{"a": 1, "a": 2}', id="duplicate key: the last wins"),
        pytest.param(b'{"type":"MODIFIED","object":{"metadata":{"name":"w"}}}', id="watch event"),
    ],
)
def test_special_inputs_decode_as_json_loads(raw: bytes) -> None:
    want = json.loads(raw)
    got = loads(raw)
    assert json.dumps(got) == json.dumps(want)


@pytest.mark.parametrize("raw", [b"", b"{", b"xx", b'{"a": }'])
def test_malformed_input_raises_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(raw)
    with pytest.raises(ValueError):
        loads(raw)
