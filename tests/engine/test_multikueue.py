"""MultiKueue's pure decisions (kqueue/engine/multikueue.py): nomination by dispatcher, the
first copy to be admitted wins, worker lost, finish and eviction. Cases named after Kueue's
tests (pkg/controller/workloaddispatcher/incrementaldispatcher_test.go,
pkg/controller/admissionchecks/multikueue/workload_test.go) where they apply."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kqueue.engine import multikueue as mk
from kqueue.engine.multikueue import ALL_AT_ONCE, INCREMENTAL, Group, Remote

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ROUND = timedelta(minutes=5)
LOST = timedelta(minutes=15)


@pytest.mark.parametrize(
    ("clusters", "nominated", "step", "round_started", "want"),
    [
        # Kueue's "one remote", "two remotes", "three remotes": the config order is kept
        # (MultiKueueIncrementalDispatcherRespectConfigOrder, kqueue's only order).
        pytest.param(["A"], [], 3, None, ["A"], id="one remote"),
        pytest.param(["B", "A"], [], 3, None, ["B", "A"], id="two remotes"),
        pytest.param(["C", "B", "A"], [], 3, None, ["C", "B", "A"], id="three remotes"),
        pytest.param(list("ONMLKJIHGFEDCBA"), [], 3, None, ["O", "N", "M"], id="fifteen remotes"),
        pytest.param(["C", "B", "A"], ["C", "B", "A"], 3, NOW - ROUND * 2, None,
                     id="all already nominated (3)"),
        pytest.param(["A"], ["A"], 3, NOW - ROUND * 2, None, id="all already nominated (1)"),
        pytest.param(list("FEDCBA"), list("FED"), 3, NOW - ROUND * 2, list("FEDCBA"),
                     id="round expired, next set nominated"),
        pytest.param(list("FEDCBA"), list("FED"), 3, NOW - timedelta(minutes=1), None,
                     id="round in progress, keep current"),
        pytest.param(list("HGFEDCBA"), list("HGFEDC"), 3, NOW - ROUND * 2, list("HGFEDCBA"),
                     id="round expired, nominate all"),
        pytest.param([], [], 3, None, None, id="no remotes"),
        pytest.param(list("EDCBA"), [], 2, None, ["E", "D"],
                     id="stepSize=2, five remotes — first batch is exactly 2"),
        pytest.param(list("EDCBA"), ["E", "D"], 2, NOW - ROUND * 2, list("EDCB"),
                     id="stepSize=2, round expired — second batch is next 2"),
        # kqueue: a round this manager did not start (it restarted) starts now.
        pytest.param(list("FEDCBA"), list("FED"), 3, None, None,
                     id="restart keeps the current round"),
    ],
)
def test_incremental_dispatcher(
    clusters: list[str], nominated: list[str], step: int, round_started: datetime | None,
    want: list[str] | None,
) -> None:
    got, again = mk.nominate_incremental(
        clusters, frozenset(clusters), nominated, step, round_started, NOW, ROUND
    )
    assert got == want
    if want is not None:
        assert again == ROUND.total_seconds()


def test_incremental_skips_inactive_clusters_and_waits_out_the_round() -> None:
    got, again = mk.nominate_incremental(
        ["A", "B", "C"], frozenset({"B", "C"}), [], 1, None, NOW, ROUND
    )
    assert got == ["B"]
    got, again = mk.nominate_incremental(
        ["A", "B", "C"], frozenset({"B", "C"}), ["B"], 1, NOW - timedelta(minutes=4), NOW, ROUND
    )
    assert got is None and again == 60.0


def _group(**kw: object) -> Group:
    base: dict[str, object] = {
        "check": "Pending", "cluster_name": None, "nominated": (), "clusters": ("w1", "w2"),
        "active": frozenset({"w1", "w2"}), "remotes": {"w1": None, "w2": None},
    }
    base.update(kw)
    return Group(**base)  # type: ignore[arg-type]


def _admitted(minutes_ago: int) -> Remote:
    return Remote(quota_reserved=True, admitted_at=NOW - timedelta(minutes=minutes_ago))


def test_all_at_once_nominates_every_active_cluster_and_copies_there() -> None:
    p = mk.plan(_group(), dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.nominate == ["w1", "w2"]
    assert p.create == ["w1", "w2"] and p.delete == [] and p.check is None


def test_all_at_once_leaves_out_an_inactive_cluster() -> None:
    g = _group(active=frozenset({"w2"}), remotes={"w2": None})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.nominate == ["w2"] and p.create == ["w2"]


def test_dispatch_waits_for_the_other_checks() -> None:
    # Kueue's allNonMKAdmissionChecksReady.
    p = mk.plan(_group(others_ready=False), dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert (p.nominate, p.create) == (None, [])


def test_external_dispatcher_follows_status_nominated_cluster_names() -> None:
    g = _group(nominated=("w2",), remotes={"w1": Remote(), "w2": None})
    p = mk.plan(g, dispatcher="example.com/my-dispatcher", worker_lost_timeout=LOST)
    assert p.nominate is None
    assert p.create == ["w2"] and p.delete == ["w1"]


def test_incremental_plan_uses_the_dispatchers_answer() -> None:
    p = mk.plan(
        _group(), dispatcher=INCREMENTAL, worker_lost_timeout=LOST, incremental=(["w1"], 300.0)
    )
    assert p.nominate == ["w1"] and p.create == ["w1"] and p.again_after == 300.0


def test_first_to_admit_wins_and_the_other_copies_go() -> None:
    # Kueue's "remote wl is admitted, the local one is not": the check is Ready, clusterName set.
    g = _group(nominated=("w1", "w2"), remotes={"w1": _admitted(1), "w2": _admitted(2)})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.winner == "w2" and p.delete == ["w1"] and p.sync_from == "w2"
    assert p.check == ("Ready", "The workload was admitted on 'w2'")
    assert p.nominate == []


def test_admitted_on_its_cluster_keeps_it_even_if_another_copy_was_earlier() -> None:
    # A worker that was lost and came back still has an older admitted copy: the workload now
    # runs on w1, so w2's copy is the orphan.
    g = _group(check="Ready", cluster_name="w1", remotes={"w1": _admitted(1), "w2": _admitted(30)})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.winner == "w1" and p.delete == ["w2"] and p.check is None


def test_quota_reserved_copies_are_not_admitted() -> None:
    g = _group(nominated=("w1", "w2"), remotes={"w1": Remote(quota_reserved=True), "w2": Remote()})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.winner is None and p.check is None and p.create == [] and p.delete == []


def test_remote_finished_finishes_the_workload_with_its_status() -> None:
    # Kueue's "remote wl is finished, the local workload and Job are marked completed".
    done = Remote(admitted_at=NOW, finished=("Succeeded", "Job finished successfully"))
    g = _group(check="Ready", cluster_name="w1", remotes={"w1": done, "w2": None})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.finish == ("Succeeded", "Job finished successfully") and p.sync_from == "w1"


def test_remote_evicted_resets_the_check_to_retry() -> None:
    # Kueue's "remote wl evicted": the check goes to Retry for re-admission elsewhere.
    evicted = Remote(quota_reserved=False, evicted="Preempted by a higher priority workload")
    g = _group(check="Ready", cluster_name="w1", remotes={"w1": evicted, "w2": None})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.check is not None and p.check[0] == "Retry"
    assert "evicted on worker cluster 'w1'" in p.check[1]


def test_worker_lost_keeps_the_workload_until_the_timeout() -> None:
    # Kueue's "the local workload's admission check is kept Ready while the worker is lost".
    g = _group(check="Ready", cluster_name="w1", remotes={"w2": None},
               lost_for=timedelta(minutes=10))
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.check is None and p.again_after == 300.0


def test_worker_lost_past_the_timeout_retries() -> None:
    # Kueue's "the local workload's admission check is set to Retry if the worker was lost
    # for longer than the timeout".
    g = _group(check="Ready", cluster_name="w1", remotes={"w2": None},
               lost_for=timedelta(minutes=16))
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.check is not None and p.check[0] == "Retry"
    assert "'w1' was unreachable for 900s" in p.check[1]


def test_ready_check_whose_copy_is_gone_retries() -> None:
    # Kueue's "Admitting remote no longer exists".
    g = _group(check="Ready", cluster_name="w1", remotes={"w1": None, "w2": None})
    p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
    assert p.check is not None and p.check[0] == "Retry"


def test_no_nomination_while_the_check_is_decided() -> None:
    # Kueue's ShouldSkipClusterNomination: "admission check is rejected", "already assigned".
    for g in (_group(check="Rejected"), _group(check="Retry")):
        p = mk.plan(g, dispatcher=ALL_AT_ONCE, worker_lost_timeout=LOST)
        assert (p.nominate, p.create) == (None, [])


def test_cleanup_deletes_every_copy() -> None:
    assert mk.cleanup({"w1": Remote(), "w2": None, "w3": _admitted(1)}) == ["w1", "w3"]


@pytest.mark.parametrize(
    ("group", "dispatcher", "waiting_for", "want"),
    [
        pytest.param(_group(), ALL_AT_ONCE, (), "Dispatched to worker clusters 'w1', 'w2'; "
                     "the first to admit the workload runs it", id="nominated by this plan"),
        pytest.param(_group(nominated=("w2",), remotes={"w1": None, "w2": Remote()}),
                     "example.com/my-dispatcher", (),
                     "Dispatched to worker clusters 'w2'; the first to admit the workload runs it",
                     id="nominated by an external dispatcher"),
        pytest.param(_group(others_ready=False), ALL_AT_ONCE, ("prov",),
                     "Not dispatched yet: waiting for admission checks prov to be Ready",
                     id="the other checks first"),
        pytest.param(_group(), "example.com/my-dispatcher", (),
                     "Not dispatched yet: waiting for the dispatcher 'example.com/my-dispatcher' "
                     "to nominate worker clusters (status.nominatedClusterNames)",
                     id="external dispatcher has not nominated"),
        pytest.param(_group(active=frozenset(), remotes={}), ALL_AT_ONCE, (),
                     "Not dispatched yet: no worker cluster is active: w1, w2",
                     id="no active worker"),
    ],
)
def test_pending_message_says_where_or_why_not(
    group: Group, dispatcher: str, waiting_for: tuple[str, ...], want: str
) -> None:
    p = mk.plan(group, dispatcher=dispatcher, worker_lost_timeout=LOST)
    assert mk.pending_message(group, p, dispatcher=dispatcher, waiting_for=waiting_for) == want
