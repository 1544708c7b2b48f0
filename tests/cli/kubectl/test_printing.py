"""kubectl's output conventions: ages and aligned columns."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kqueue.cli.kubectl.printing import human_duration, table


@pytest.mark.parametrize(
    ("d", "want"),
    [
        pytest.param(timedelta(seconds=-5), "<invalid>", id="clock skew beyond a second"),
        pytest.param(timedelta(milliseconds=-500), "0s", id="within a second of skew"),
        pytest.param(timedelta(seconds=0), "0s", id="just created"),
        pytest.param(timedelta(seconds=119), "119s", id="seconds up to two minutes"),
        pytest.param(timedelta(minutes=2), "2m", id="two minutes"),
        pytest.param(timedelta(minutes=9, seconds=59), "9m59s", id="minutes and seconds under ten"),
        pytest.param(timedelta(minutes=10, seconds=30), "10m", id="whole minutes from ten"),
        pytest.param(timedelta(hours=2, minutes=59), "179m", id="minutes up to three hours"),
        pytest.param(timedelta(hours=3), "3h", id="three hours"),
        pytest.param(timedelta(hours=7, minutes=5), "7h5m", id="hours and minutes under eight"),
        pytest.param(timedelta(hours=47, minutes=59), "47h", id="hours up to two days"),
        pytest.param(timedelta(days=2), "2d", id="two days"),
        pytest.param(timedelta(days=7, hours=23), "7d23h", id="days and hours under eight days"),
        pytest.param(timedelta(days=400), "400d", id="days up to two years"),
        pytest.param(timedelta(days=365 * 3 + 10), "3y10d", id="years and days under eight"),
        pytest.param(timedelta(days=365 * 3), "3y", id="whole years"),
        pytest.param(timedelta(days=365 * 9 + 100), "9y", id="years from eight"),
    ],
)
def test_human_duration(d: timedelta, want: str) -> None:
    assert human_duration(d) == want


@pytest.mark.parametrize(
    ("headers", "rows", "want"),
    [
        pytest.param(
            ["NAME", "COHORT", "AGE"],
            [["cq", "", "5m"], ["a-longer-name", "org", "10s"]],
            "NAME            COHORT   AGE\ncq                       5m\na-longer-name   org      10s",
            id="columns padded to the widest cell plus three spaces",
        ),
        pytest.param(
            ["NAME", "MESSAGE"],
            [["w", "a long message that is not padded"]],
            "NAME   MESSAGE\nw      a long message that is not padded",
            id="the last column is not padded",
        ),
        pytest.param(["NAME"], [], "NAME", id="headers only"),
    ],
)
def test_table(headers: list[str], rows: list[list[str]], want: str) -> None:
    assert table(headers, rows) == want
