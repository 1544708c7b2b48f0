"""Flavor assignment through one scheduling cycle: table of named cases."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kqueue.engine.types import Workload

from .builders import (
    Obj,
    admitted_flavors,
    make_cohort,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    pending_reasons,
    t,
)

ON_DEMAND = make_flavor("on-demand").label("instance", "on-demand").obj()
SPOT = (
    make_flavor("spot").label("instance", "spot").taint("spot", "true", "NoSchedule").obj()
)
SPOT_UNTAINTED = make_flavor("spot").label("instance", "spot").obj()


@dataclass
class Case:
    name: str
    objects: list[Obj]
    workloads: list[Workload]
    want_admitted: dict[str, dict[str, str]] = field(default_factory=dict)
    want_pending: dict[str, str] = field(default_factory=dict)
    # workload name -> exact message
    want_messages: dict[str, str] = field(default_factory=dict)


CASES = [
    Case(
        "fits in the first flavor",
        [ON_DEMAND, SPOT_UNTAINTED, make_cq("cq").quota("on-demand", cpu="10").quota("spot", cpu="10").obj()],
        [make_workload("a").request("cpu", "4").obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "first flavor too small, second fits",
        [ON_DEMAND, SPOT_UNTAINTED, make_cq("cq").quota("on-demand", cpu="2").quota("spot", cpu="10").obj()],
        [make_workload("a").request("cpu", "4").obj()],
        want_admitted={"a": {"cpu": "spot"}},
    ),
    Case(
        "untolerated taint skips the flavor",
        [SPOT, ON_DEMAND, make_cq("cq").quota("spot", cpu="10").quota("on-demand", cpu="10").obj()],
        [make_workload("a").request("cpu", "4").obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "a toleration lets the tainted flavor be used",
        [SPOT, ON_DEMAND, make_cq("cq").quota("spot", cpu="10").quota("on-demand", cpu="10").obj()],
        [make_workload("a").request("cpu", "4").toleration("spot", "true", "NoSchedule").obj()],
        want_admitted={"a": {"cpu": "spot"}},
    ),
    Case(
        "Exists toleration without effect tolerates any effect",
        [SPOT, make_cq("cq").quota("spot", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").toleration("spot", op="Exists").obj()],
        want_admitted={"a": {"cpu": "spot"}},
    ),
    Case(
        "PreferNoSchedule taints are not a reason to skip",
        [
            make_flavor("soft").taint("x", "y", "PreferNoSchedule").obj(),
            make_cq("cq").quota("soft", cpu="10").obj(),
        ],
        [make_workload("a").request("cpu", "1").obj()],
        want_admitted={"a": {"cpu": "soft"}},
    ),
    Case(
        "nodeSelector conflicting with the flavor's labels skips it",
        [ON_DEMAND, SPOT_UNTAINTED, make_cq("cq").quota("on-demand", cpu="10").quota("spot", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").node_selector("instance", "spot").obj()],
        want_admitted={"a": {"cpu": "spot"}},
    ),
    Case(
        "nodeSelector on a key the flavor does not set is ignored",
        [ON_DEMAND, make_cq("cq").quota("on-demand", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").node_selector("zone", "eu-1").obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "required affinity NotIn skips the flavor",
        [ON_DEMAND, SPOT_UNTAINTED, make_cq("cq").quota("on-demand", cpu="10").quota("spot", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").affinity([("instance", "NotIn", ("on-demand",))]).obj()],
        want_admitted={"a": {"cpu": "spot"}},
    ),
    Case(
        "affinity terms are ORed",
        [ON_DEMAND, SPOT_UNTAINTED, make_cq("cq").quota("on-demand", cpu="10").quota("spot", cpu="10").obj()],
        [
            make_workload("a")
            .request("cpu", "1")
            .affinity([("instance", "In", ("gpu",))], [("instance", "In", ("on-demand",))])
            .obj()
        ],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "no flavor matches: NoMatchingFlavor with every flavor's reason",
        [SPOT, ON_DEMAND, make_cq("cq").quota("spot", cpu="10").quota("on-demand", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").node_selector("instance", "gpu").obj()],
        want_pending={"a": "NoMatchingFlavor"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: flavor on-demand doesn't match node "
            "affinity, untolerated taint spot=true:NoSchedule in flavor spot"
        },
    ),
    Case(
        "resource the ClusterQueue does not cover",
        [ON_DEMAND, make_cq("cq").quota("on-demand", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").request("nvidia.com/gpu", "1").obj()],
        want_pending={"a": "NoMatchingFlavor"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable "
            "in ClusterQueue"
        },
    ),
    Case(
        "zero request of an uncovered resource is ignored",
        [ON_DEMAND, make_cq("cq").quota("on-demand", cpu="10").obj()],
        [make_workload("a").request("cpu", "1").request("nvidia.com/gpu", "0").obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "request bigger than all reachable quota: ExceedsMaxQuota with numbers",
        [ON_DEMAND, make_cq("cq").cohort("c").quota("on-demand", cpu="10").obj(),
         make_cq("other").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("a").queue("cq").request("cpu", "24").obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
            "on-demand, request > maximum capacity (24 > 20)"
        },
    ),
    Case(
        "request within nominal but used up: WaitingForQuota with what is missing",
        [ON_DEMAND, make_cq("cq").quota("on-demand", cpu="10").obj()],
        [
            make_workload("held").request("cpu", "7").reserved_in("cq", "on-demand").obj(),
            make_workload("a").request("cpu", "8").obj(),
        ],
        want_pending={"a": "WaitingForQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
            "flavor on-demand, 5 more needed"
        },
    ),
    Case(
        "memory is printed as a Kubernetes quantity",
        [ON_DEMAND, make_cq("cq").quota("on-demand", memory="4Gi").obj()],
        [make_workload("a").request("memory", "6Gi").obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient quota for memory in flavor "
            "on-demand, request > maximum capacity (6Gi > 4Gi)"
        },
    ),
    Case(
        "borrowing: whenCanBorrow=MayStopSearch stays on the first flavor",
        [ON_DEMAND, SPOT_UNTAINTED,
         make_cq("cq").cohort("c").quota("on-demand", cpu="2").quota("spot", cpu="10").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("a").queue("cq").request("cpu", "4").obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "borrowing: whenCanBorrow=TryNextFlavor prefers a flavor without borrowing",
        [ON_DEMAND, SPOT_UNTAINTED,
         make_cq("cq").cohort("c").fungibility(borrow="TryNextFlavor")
         .quota("on-demand", cpu="2").quota("spot", cpu="10").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("a").queue("cq").request("cpu", "4").obj()],
        want_admitted={"a": {"cpu": "spot"}},
    ),
    Case(
        "borrowing: TryNextFlavor falls back to borrowing when nothing fits without",
        [ON_DEMAND, SPOT_UNTAINTED,
         make_cq("cq").cohort("c").fungibility(borrow="TryNextFlavor")
         .quota("on-demand", cpu="2").quota("spot", cpu="1").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("a").queue("cq").request("cpu", "4").obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "borrowingLimit caps borrowing",
        [ON_DEMAND,
         make_cq("cq").cohort("c").quota("on-demand", cpu="2", borrowing_limit="1").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("a").queue("cq").request("cpu", "4").obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
            "on-demand, request > maximum capacity (4 > 3)"
        },
    ),
    Case(
        "lendingLimit caps what others can borrow",
        [ON_DEMAND,
         make_cq("cq").cohort("c").quota("on-demand", cpu="0").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10", lending_limit="3").obj()],
        [make_workload("a").queue("cq").request("cpu", "4").obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
            "on-demand, request > maximum capacity (4 > 3)"
        },
    ),
    Case(
        "lendingLimit: the lendable part can be borrowed",
        [ON_DEMAND,
         make_cq("cq").cohort("c").quota("on-demand", cpu="0").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10", lending_limit="3").obj()],
        [make_workload("b").queue("cq").request("cpu", "3").obj()],
        want_admitted={"b": {"cpu": "on-demand"}},
    ),
    Case(
        "borrowing needs unused quota of the cohort",
        [ON_DEMAND,
         make_cq("cq").cohort("c").quota("on-demand", cpu="2").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="4").obj()],
        [make_workload("held").request("cpu", "3").reserved_in("lender", "on-demand").obj(),
         make_workload("a").queue("cq").request("cpu", "4").obj()],
        want_pending={"a": "WaitingForQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
            "flavor on-demand, 1 more needed"
        },
    ),
    Case(
        "all resources of a pod set in one group share the flavor",
        [ON_DEMAND, SPOT_UNTAINTED,
         make_cq("cq").quota("on-demand", cpu="10", memory="1Gi").quota("spot", cpu="10", memory="8Gi").obj()],
        [make_workload("a").request("cpu", "2").request("memory", "2Gi").obj()],
        want_admitted={"a": {"cpu": "spot", "memory": "spot"}},
    ),
    Case(
        "resource groups are assigned independently",
        [ON_DEMAND, SPOT_UNTAINTED, make_flavor("a100").obj(), make_flavor("t4").obj(),
         make_cq("cq").quota("on-demand", cpu="1").quota("spot", cpu="10")
         .group().quota("a100", **{"nvidia.com/gpu": "1"}).quota("t4", **{"nvidia.com/gpu": "4"}).obj()],
        [make_workload("a").request("cpu", "2").request("nvidia.com/gpu", "2").obj()],
        want_admitted={"a": {"cpu": "spot", "nvidia.com/gpu": "t4"}},
    ),
    Case(
        "pod sets accumulate usage when choosing flavors",
        [ON_DEMAND, SPOT_UNTAINTED, make_cq("cq").quota("on-demand", cpu="10").quota("spot", cpu="10").obj()],
        [make_workload("a").pod_set("driver", 1).request("cpu", "6")
         .pod_set("workers", 2).request("cpu", "3").obj()],
        want_admitted={"a": {"driver.cpu": "on-demand", "workers.cpu": "spot"}},
    ),
    Case(
        "second pod set that does not fit reports the earlier pod sets' share",
        [ON_DEMAND, make_cq("cq").quota("on-demand", cpu="10").obj()],
        [make_workload("a").pod_set("driver", 1).request("cpu", "6")
         .pod_set("workers", 2).request("cpu", "3").obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set workers: insufficient quota for cpu in flavor "
            "on-demand, previously considered podsets requests (6) + current podset request (6) "
            "> maximum capacity (10)"
        },
    ),
    Case(
        "pods resource counts pods when covered",
        [ON_DEMAND, make_cq("cq").quota("on-demand", cpu="10", pods="3").obj()],
        [make_workload("a").request("cpu", "1").count(4).obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient quota for pods in flavor "
            "on-demand, request > maximum capacity (4 > 3)"
        },
    ),
    Case(
        "hierarchical cohorts: borrow from a cohort's own quota",
        [ON_DEMAND,
         make_cohort("root").obj(),
         make_cohort("team").parent("root").quota("on-demand", cpu="6").obj(),
         make_cq("cq").cohort("team").quota("on-demand", cpu="2").obj()],
        [make_workload("a").queue("cq").request("cpu", "8").obj(),
         make_workload("b").queue("cq").request("cpu", "9").created(1).obj()],
        want_admitted={"a": {"cpu": "on-demand"}},
    ),
    Case(
        "hierarchical cohorts: a cohort's borrowing limit caps its subtree",
        [ON_DEMAND,
         make_cohort("root").quota("on-demand", cpu="100").obj(),
         make_cohort("team").parent("root").quota("on-demand", cpu="2", borrowing_limit="3").obj(),
         make_cq("cq").cohort("team").quota("on-demand", cpu="2").obj()],
        [make_workload("a").queue("cq").request("cpu", "8").obj()],
        want_pending={"a": "ExceedsMaxQuota"},
        want_messages={
            "a": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
            "on-demand, request > maximum capacity (8 > 7)"
        },
    ),
    Case(
        "hierarchical cohorts: a cohort's lending limit keeps quota in its subtree",
        [ON_DEMAND,
         make_cohort("root").obj(),
         make_cohort("team-a").parent("root").quota("on-demand", cpu="10", lending_limit="4").obj(),
         make_cohort("team-b").parent("root").obj(),
         make_cq("a").cohort("team-a").quota("on-demand", cpu="0").obj(),
         make_cq("b").cohort("team-b").quota("on-demand", cpu="0").obj()],
        [make_workload("wa").queue("a").request("cpu", "10").obj(),
         make_workload("wb").queue("b").request("cpu", "5").obj()],
        want_admitted={"wa": {"cpu": "on-demand"}},
        want_pending={"wb": "ExceedsMaxQuota"},
    ),
    Case(
        "non-preemptible workloads never borrow",
        [ON_DEMAND,
         make_cq("cq").cohort("c").quota("on-demand", cpu="4").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("np").queue("cq").request("cpu", "6").non_preemptible().obj(),
         make_workload("p").queue("lender").request("cpu", "6").obj()],
        want_admitted={"p": {"cpu": "on-demand"}},
        want_pending={"np": "ExceedsMaxQuota"},
        want_messages={
            "np": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
            "on-demand, request > maximum capacity (6 > 4) (a non-preemptible workload may not "
            "borrow)"
        },
    ),
    Case(
        "non-preemptible workloads fit within nominal quota",
        [ON_DEMAND,
         make_cq("cq").cohort("c").quota("on-demand", cpu="4").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("np").queue("cq").request("cpu", "4").non_preemptible().obj()],
        want_admitted={"np": {"cpu": "on-demand"}},
    ),
    Case(
        "non-preemptible by the ClusterQueue's priority threshold",
        [ON_DEMAND,
         make_cq("cq").cohort("c").preemptible_threshold(100).quota("on-demand", cpu="4").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("high").queue("cq").priority(200).request("cpu", "6").obj(),
         make_workload("low").queue("cq").priority(50).request("cpu", "6").created(1).obj()],
        want_pending={"high": "ExceedsMaxQuota"},
    ),
    Case(
        "non-preemptible uses a later flavor rather than borrowing",
        [ON_DEMAND, SPOT_UNTAINTED,
         make_cq("cq").cohort("c").quota("on-demand", cpu="2").quota("spot", cpu="8").obj(),
         make_cq("lender").cohort("c").quota("on-demand", cpu="10").obj()],
        [make_workload("np").queue("cq").request("cpu", "4").non_preemptible().obj()],
        want_admitted={"np": {"cpu": "spot"}},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_flavor_assignment(case: Case) -> None:
    engine = make_engine(*case.objects, *case.workloads)
    result = engine.schedule(t(100))
    assert admitted_flavors(result) == case.want_admitted
    assert pending_reasons(result) == case.want_pending
    messages = {p.workload.split("/", 1)[1]: p.message for p in result.pending}
    for name, want in case.want_messages.items():
        assert messages[name] == want
