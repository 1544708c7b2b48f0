"""kqueue.api.suggest: "did you mean ...?" for names that do not exist."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kqueue.api.suggest import closest, did_you_mean


@pytest.mark.parametrize(
    ("name", "candidates", "want"),
    [
        pytest.param("user-qeue", ["user-queue", "team-a", "batch"], "user-queue", id="typo"),
        pytest.param("mian", ["main", "lab"], "main", id="transposed letters"),
        pytest.param("userqueue", ["user-queue"], "user-queue", id="missing dash"),
        pytest.param("xyz", ["user-queue", "batch"], None, id="nothing close"),
        pytest.param("batch", [], None, id="no candidates"),
        pytest.param("", ["batch"], None, id="empty name"),
        pytest.param("batch", ["batch"], None, id="the name itself is no suggestion"),
        pytest.param("batch", ["batch", "batches"], "batches", id="itself skipped, next best"),
        pytest.param("ab-1", ["ab-2", "ab-0"], "ab-0", id="ties go to the first in order"),
        pytest.param("team-b", ["tem", "team-a"], "team-a", id="most similar wins"),
    ],
)
def test_closest(name: str, candidates: list[str], want: str | None) -> None:
    assert closest(name, candidates) == want


def test_did_you_mean_phrase() -> None:
    assert did_you_mean("user-qeue", ["user-queue"]) == 'did you mean "user-queue"?'
    assert did_you_mean("zzz", ["user-queue"]) == ""


def test_cutoff_is_adjustable() -> None:
    assert closest("abcd", ["abxy"]) is None  # ratio 0.5
    assert closest("abcd", ["abxy"], cutoff=0.5) == "abxy"


@given(
    name=st.text(alphabet="abc-", max_size=6),
    candidates=st.lists(st.text(alphabet="abc-", max_size=6), max_size=6),
)
def test_suggestion_is_a_candidate_and_order_does_not_matter(
    name: str, candidates: list[str]
) -> None:
    got = closest(name, candidates)
    assert got is None or (got in candidates and got != name)
    assert closest(name, list(reversed(candidates))) == got
