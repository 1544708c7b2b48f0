"""Exact Kubernetes quantities: parsing, canonical printing, suffixes, rounding, never floats."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kqueue.api.quantity import (
    ALLOWED_FORMS,
    Quantity,
    QuantityError,
    canonical,
    format_quantity,
    parse_exact,
    parse_quantity,
)
from kqueue.api.v1alpha1 import ResourceQuota

RESOURCES = st.sampled_from(["cpu", "memory", "example.com/gpu", "ephemeral-storage", "pods"])
AMOUNTS = st.integers(min_value=-(10**21), max_value=10**21)
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Kubernetes' own pattern: whatever it accepts, kqueue accepts (and the reverse).
K8S_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


@given(AMOUNTS, RESOURCES)
def test_parse_of_format_is_identity(amount: int, resource: str) -> None:
    text = format_quantity(amount, resource)
    assert parse_quantity(text, resource) == amount
    assert K8S_PATTERN.match(text), text


@given(AMOUNTS, RESOURCES)
def test_quantity_round_trips_through_its_text(amount: int, resource: str) -> None:
    q = Quantity.from_units(amount, resource)
    assert q.units(resource) == amount
    assert Quantity(str(q)) == q
    assert str(Quantity(str(q))) == str(q)


@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=999),
    st.sampled_from(sorted(BINARY) + sorted(DECIMAL)),
)
def test_suffixes_scale_exactly(whole: int, frac: int, suffix: str) -> None:
    text = f"{whole}.{frac:03d}{suffix}"
    factor = BINARY.get(suffix) or DECIMAL[suffix]
    expected = (Fraction(whole) + Fraction(frac, 1000)) * factor
    assert parse_exact(text) == expected
    ceil_base = -((-expected.numerator) // expected.denominator)
    assert parse_quantity(text, "memory") == ceil_base
    milli = expected * 1000
    assert parse_quantity(text, "cpu") == -((-milli.numerator) // milli.denominator)


@given(st.integers(min_value=0, max_value=10**9))
def test_suffix_equivalences(n: int) -> None:
    assert parse_quantity(f"{n}Ki") == parse_quantity(str(n * 1024))
    assert parse_quantity(f"{n}k") == parse_quantity(f"{n}e3") == parse_quantity(str(n * 1000))
    assert parse_quantity(f"{n}m", "cpu") == n
    assert parse_quantity(f"{n}", "cpu") == parse_quantity(f"{n * 1000}m", "cpu")
    assert Quantity(f"{n}Mi") == Quantity(f"{n * 1024}Ki")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1Gi", "1024Mi"),
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1e3", "1k"),
        ("1E3", "1000"),
        (".5", "0.5"),
        ("+2", "2"),
        ("1.5Gi", "1536Mi"),
        ("1e-3", "1m"),
        ("1000000u", "1"),
    ],
)
def test_equivalent_spellings(a: str, b: str) -> None:
    assert Quantity(a) == Quantity(b)
    assert str(Quantity(a)) == str(Quantity(b))


@pytest.mark.parametrize(
    ("text", "resource", "units"),
    [
        ("0.1m", "cpu", 1),  # finer than a milli-CPU rounds up
        ("1n", "cpu", 1),
        ("1.5", "memory", 2),  # finer than a byte rounds up
        ("100m", "memory", 1),
        ("2", "cpu", 2000),
        ("250m", "cpu", 250),
        ("4Gi", "memory", 4 * 2**30),
        ("3", "example.com/gpu", 3),
    ],
)
def test_units_round_up(text: str, resource: str, units: int) -> None:
    assert parse_quantity(text, resource) == units
    assert Quantity(text).units(resource) == units


@pytest.mark.parametrize(
    ("text", "resource", "want"),
    [
        ("1024Mi", "memory", "1Gi"),
        ("1500m", "cpu", "1500m"),
        ("2000m", "cpu", "2"),
        ("0.5", "cpu", "500m"),
        ("1000", "memory", "1k"),
        ("0", "memory", "0"),
        ("-1Gi", "memory", "-1Gi"),
    ],
)
def test_canonical_form(text: str, resource: str, want: str) -> None:
    assert canonical(text, resource) == want
    assert str(Quantity(text)) == want


@pytest.mark.parametrize(
    "text",
    ["", " ", "abc", "1.2.3", "1Kb", "Mi", "--1", "1 Gi", "1e", "0x10", "1ki", "1.5.Gi", "e3", "∞"],
)
def test_invalid_strings_name_the_allowed_forms(text: str) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(text, "cpu")
    assert ALLOWED_FORMS in str(err.value)
    with pytest.raises(QuantityError):
        Quantity(text)


@given(st.text(max_size=12))
def test_any_string_parses_to_an_int_or_raises(text: str) -> None:
    if K8S_PATTERN.match(text.strip()) and "e" not in text.lower():
        assert isinstance(parse_quantity(text, "cpu"), int)
        return
    try:
        result = parse_quantity(text, "memory")
    except QuantityError as err:
        assert ALLOWED_FORMS in str(err) or "out of range" in str(err)
    else:
        assert type(result) is int


@pytest.mark.parametrize("value", [True, False, None, [1], {"a": 1}, 1.5j])
def test_non_quantities_are_rejected(value: object) -> None:
    with pytest.raises(QuantityError):
        Quantity.coerce(value)


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_yaml_numbers_are_read_from_their_text_not_their_binary_value(thousandths: int) -> None:
    # A YAML float such as 0.1 is read as the decimal 0.1 exactly, as the API server reads the
    # number's text; its binary value (0.1000000000000000055...) is never used.
    text = f"{thousandths / 1000!r}"
    assert Quantity.coerce(float(text)).exact == Fraction(text) == Fraction(thousandths, 1000)
    assert Quantity.coerce(0.1) == Quantity("100m")


def test_results_are_never_floats() -> None:
    for text in ("0.5", "1.5Gi", "1e-3", "0.1m", "7"):
        for resource in ("cpu", "memory"):
            assert type(parse_quantity(text, resource)) is int
            assert type(Quantity(text).units(resource)) is int
    assert isinstance(Quantity("0.5").exact, Fraction)


def test_arithmetic_and_order() -> None:
    assert Quantity("1") + Quantity("500m") == Quantity("1.5")
    assert Quantity("2Gi") - Quantity("1Gi") == Quantity("1Gi")
    assert Quantity("250m") * 4 == Quantity("1")
    assert 2 * Quantity("1Ki") == Quantity("2Ki")
    assert sorted([Quantity("1Gi"), Quantity("1"), Quantity("1k")]) == [
        Quantity("1"),
        Quantity("1k"),
        Quantity("1Gi"),
    ]
    assert len({Quantity("1k"), Quantity("1000")}) == 1
    assert repr(Quantity("1024Mi")) == "Quantity('1Gi')"


def test_quantity_fields_in_models() -> None:
    rq = ResourceQuota.model_validate({"name": "cpu", "nominalQuota": 2})
    assert rq.nominal() == 2000
    assert rq.to_dict() == {"name": "cpu", "nominalQuota": "2"}
    rq = ResourceQuota.model_validate({"name": "memory", "nominalQuota": "1073741824"})
    assert rq.to_dict()["nominalQuota"] == "1Gi"
    rq = ResourceQuota(name="cpu", nominal_quota=Quantity.from_units(1500, "cpu"))
    assert rq.to_dict()["nominalQuota"] == "1500m"
    with pytest.raises(ValueError, match="not a quantity"):
        ResourceQuota.model_validate({"name": "cpu", "nominalQuota": True})
