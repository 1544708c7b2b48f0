"""Resource transformations and excluded prefixes (Kueue's Configuration ``resources``).

Kueue's pkg/workload/workload_test.go ``TestNewInfo`` cases for transformations and excluded
prefixes, and pkg/scheduler/scheduler_tas_test.go's two "workload with Resource Transformation"
cases, ported by name; plus the engine's use of them (quota counts the transformed requests,
placement the pods' own) and the Configuration's validation."""

from __future__ import annotations

from fractions import Fraction

import pytest
from pydantic import ValidationError

from kqueue.api import config
from kqueue.api.quantity import parse_exact, parse_quantity
from kqueue.engine import from_api
from kqueue.engine.transformations import QuotaResources, Transformation, quota_requests
from kqueue.engine.types import ClusterQueueName, FlavorName, ResourceFlavor, ResourceName

from .builders import make_cq
from .tas_support import HOST, SINGLE, Cluster, node, pset, tas_flavor, wl

R = ResourceName


def _tr(input: str, replace: bool = False, multiply_by: str | None = None,
        **outputs: str) -> Transformation:
    return Transformation(R(input), replace, R(multiply_by) if multiply_by else None,
                          {R(k.replace("__", "/").replace("_", "-")): parse_exact(v)
                           for k, v in outputs.items()})


def _rules(*trs: Transformation, exclude: tuple[str, ...] = ()) -> QuotaResources:
    return QuotaResources(exclude, {tr.input: tr for tr in trs})


def _req(**amounts: str) -> dict[ResourceName, int]:
    out = {}
    for k, v in amounts.items():
        name = k.replace("__", "/").replace("_", "-")
        out[R(name)] = parse_quantity(v, name)
    return out


# name -> (one pod's requests, rules, one pod's requests as quota counts them)
CASES: dict[str, tuple[dict[ResourceName, int], QuotaResources, dict[ResourceName, int]]] = {
    "filterResources": (
        _req(cpu="10m", memory="512Ki", **{"networking.example.com__vpc1": "1"}),
        _rules(exclude=("dummyPrefix", "networking.example.com/")),
        _req(cpu="10m", memory="512Ki"),
    ),
    # Pod set "a" of Kueue's "transformResources" (two MIG profiles replaced).
    "transformResources": (
        _req(**{"nvidia.com__mig-1g.5gb": "2", "nvidia.com__mig-2g.10gb": "1"}, cpu="1"),
        _rules(
            _tr("nvidia.com/mig-1g.5gb", True, **{"example.com__accelerator-memory": "5Ki",
                                                  "example.com__credits": "10"}),
            _tr("nvidia.com/mig-2g.10gb", True, **{"example.com__accelerator-memory": "10Ki",
                                                   "example.com__credits": "15"}),
        ),
        {R("cpu"): 1000, R("example.com/accelerator-memory"): 20 * 1024,
         R("example.com/credits"): 35},
    ),
    # Pod set "c" of "transformResources": multiplyBy.
    "transformResources; multiplyBy": (
        _req(**{"nvidia.com__vgpu": "2", "nvidia.com__vgpucores": "20",
                "nvidia.com__vgpumem": "1024"}),
        _rules(
            _tr("nvidia.com/vgpucores", True, "nvidia.com/vgpu",
                **{"nvidia.com__total-vgpucores": "1"}),
            _tr("nvidia.com/vgpumem", True, "nvidia.com/vgpu",
                **{"nvidia.com__total-vgpumem": "1"}),
        ),
        {R("nvidia.com/vgpu"): 2, R("nvidia.com/total-vgpucores"): 40,
         R("nvidia.com/total-vgpumem"): 2048},
    ),
    "transformAllowanceAboveIt": (
        _req(**{"nvidia.com__gpumem": "2048", "nvidia.com__gpu": "2"}),
        _rules(
            _tr("nvidia.com/gpumem", True, "nvidia.com/gpu",
                **{"quota.example.com__gpu-memory-overage": "1"}),
            _tr("nvidia.com/gpu", **{"quota.example.com__gpu-memory-overage": "-1024"}),
        ),
        {R("quota.example.com/gpu-memory-overage"): 2048, R("nvidia.com/gpu"): 2},
    ),
    "transformAllowanceExactlyAtIt": (
        _req(**{"nvidia.com__gpumem": "1024", "nvidia.com__gpu": "2"}),
        _rules(
            _tr("nvidia.com/gpumem", True, "nvidia.com/gpu",
                **{"quota.example.com__gpu-memory-overage": "1"}),
            _tr("nvidia.com/gpu", **{"quota.example.com__gpu-memory-overage": "-1024"}),
        ),
        {R("quota.example.com/gpu-memory-overage"): 0, R("nvidia.com/gpu"): 2},
    ),
    "transformAllowanceUnderIt": (
        _req(**{"nvidia.com__gpumem": "512", "nvidia.com__gpu": "2"}),
        _rules(
            _tr("nvidia.com/gpumem", True, "nvidia.com/gpu",
                **{"quota.example.com__gpu-memory-overage": "1"}),
            _tr("nvidia.com/gpu", **{"quota.example.com__gpu-memory-overage": "-1024"}),
        ),
        {R("quota.example.com/gpu-memory-overage"): 0, R("nvidia.com/gpu"): 2},
    ),
    "transformAllowanceDoesNotReachADirectRequest": (
        _req(**{"example.com__gpu": "8", "example.com__credit": "3"}),
        _rules(_tr("example.com/credit", True, **{"example.com__gpu": "-1"})),
        {R("example.com/gpu"): 8},
    ),
    "transformOutputSharingANameWithARequestIsAdded": (
        _req(**{"example.com__gpu": "1", "example.com__credit": "1"}),
        _rules(_tr("example.com/credit", True, **{"example.com__gpu": "1"})),
        {R("example.com/gpu"): 2},
    ),
    "transformOutputSharingANameWithItsRetainedInputIsAdded": (
        _req(**{"example.com__gpu": "1"}),
        _rules(_tr("example.com/gpu", **{"example.com__gpu": "5"})),
        {R("example.com/gpu"): 6},
    ),
    "transformRetainWithMultiplyBy": (
        _req(**{"example.com__gpumem": "1024", "example.com__gpu": "2"}),
        _rules(_tr("example.com/gpumem", False, "example.com/gpu",
                   **{"example.com__gpumem-quota": "1"})),
        {R("example.com/gpumem"): 1024, R("example.com/gpumem-quota"): 2048,
         R("example.com/gpu"): 2},
    ),
    "transformRetainWithMultiplyByUnderOne": (
        _req(**{"example.com__gpumem": "1024"}, cpu="500m"),
        _rules(_tr("example.com/gpumem", False, "cpu", **{"example.com__gpumem-quota": "1"})),
        {R("example.com/gpumem"): 1024, R("example.com/gpumem-quota"): 512, R("cpu"): 500},
    ),
    "transformOutputSharingANameWithItsRetainedInputIsAddedToTheAmountRequested": (
        _req(**{"example.com__gpu": "1", "example.com__node": "2"}),
        _rules(_tr("example.com/gpu", False, "example.com/node", **{"example.com__gpu": "1"})),
        {R("example.com/gpu"): 3, R("example.com/node"): 2},
    ),
    # Kueue caps the product at MaxInt64; kqueue's integers are exact, so it is the product.
    "transformProductPastTheRangeIsNotFlooredAway": (
        _req(**{"example.com__credit": "10000000000"}),
        _rules(_tr("example.com/credit", True, **{"example.com__gpu": "10000000000"})),
        {R("example.com/gpu"): 10**20},
    ),
    "transformMilliValues": (
        _req(cpu="100m", memory="100M"),
        _rules(
            _tr("cpu", True, **{"example.com__cpu-credits": "3000"}),
            _tr("memory", True, **{"example.com__memory-credits": "3m"}),
        ),
        {R("example.com/cpu-credits"): 300, R("example.com/memory-credits"): 300 * 1000},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_new_info(name: str) -> None:
    requests, rules, want = CASES[name]
    assert quota_requests(requests, rules) == want


def test_without_rules_requests_are_counted_as_they_are() -> None:
    requests = _req(cpu="1", memory="1Gi")
    assert quota_requests(requests, QuotaResources()) == requests


# -- the engine: quota counts the transformed requests, placement the pods' own -------------

CREDITS = ResourceFlavor(FlavorName("credits"), {}, (), ())
CPU_CREDITS = {"cpu": _tr("cpu", False, **{"cpu__credits": "1"})}


def _credits_cluster(cpu_quota: str, request: str) -> Cluster:
    cq = make_cq("tas-main").quota("tas-default", cpu=cpu_quota).group().quota(
        "credits", **{"cpu_credits": "1"}).obj()
    return Cluster([node("x1", cpu="2")], [SINGLE], [tas_flavor(), CREDITS], [cq],
                   [wl("foo", pset("one", 1, required=HOST, cpu=request))])


RULES = QuotaResources((), {R("cpu"): Transformation(R("cpu"), False, None,
                                                     {R("cpu_credits"): Fraction(1)})})


def test_workload_with_resource_transformation_retain_cpu_cpu_credits() -> None:
    """Kueue's "workload with Resource Transformation (Retain CPU → cpu_credits)": one cpu
    also counts one cpu_credits, held by a plain flavor next to the topology-aware one (a
    quota-only resource); the pod is placed by its cpu alone."""
    engine = _credits_cluster("1", "1").engine(quota_resources=RULES)
    result = engine.schedule(_t())
    assert [a.workload for a in result.admitted] == ["default/foo"], result.pending
    (psa,) = result.admitted[0].admission.pod_sets
    # Kueue writes the credits as "1000m": one unit (kqueue counts cpu in milli-units, others
    # in base units).
    assert _usage(psa) == {"cpu": ("tas-default", 1000), "cpu_credits": ("credits", 1)}
    assert psa.topology is not None and [(tuple(v), n) for v, n in psa.topology.domains] == [
        (("x1",), 1)]


def test_workload_with_resource_transformation_retain_cpu_cpu_credits_not_enough_credits(
) -> None:
    """Kueue's "workload with Resource Transformation (Retain CPU → cpu_credits, not enough
    credits)": two cpus fit the cpu quota and the node, but count two cpu_credits of one."""
    engine = _credits_cluster("2", "2").engine(quota_resources=RULES)
    result = engine.schedule(_t())
    assert not result.admitted
    (pending,) = result.pending
    assert "cpu_credits" in pending.message, pending.message
    assert engine.inactive(ClusterQueueName("tas-main")) is None


def _t() -> object:
    from .builders import t

    return t(1)


def _usage(psa: object) -> dict[str, tuple[str, int]]:
    flavors = psa.flavors  # type: ignore[attr-defined]
    usage = psa.resource_usage  # type: ignore[attr-defined]
    return {str(r): (str(flavors[r]), usage[r]) for r in flavors}


# -- the Configuration ------------------------------------------------------------------------


def test_the_configuration_reads_kueue_s_fields() -> None:
    cfg = config.Configuration.model_validate({
        "apiVersion": config.API_VERSION, "kind": config.KIND,
        "resources": {
            "excludeResourcePrefixes": ["networking.example.com/"],
            "transformations": [
                {"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace",
                 "outputs": {"example.com/accelerator-memory": "5Ki", "example.com/credits": 10}},
                {"input": "nvidia.com/vgpumem", "multiplyBy": "nvidia.com/vgpu",
                 "outputs": {"nvidia.com/total-vgpumem": "1"}},
            ],
        },
    })
    rules = from_api.quota_resources(cfg)
    assert rules.exclude_prefixes == ("networking.example.com/",)
    mig = rules.transformations[R("nvidia.com/mig-1g.5gb")]
    assert mig.replace and mig.outputs == {R("example.com/accelerator-memory"): 5120,
                                           R("example.com/credits"): 10}
    # Kueue's default strategy is Retain.
    vgpu = rules.transformations[R("nvidia.com/vgpumem")]
    assert not vgpu.replace and vgpu.multiply_by == "nvidia.com/vgpu"


@pytest.mark.parametrize(
    ("transformations", "error"),
    [
        pytest.param([{"input": "a", "strategy": "Keep"}], "strategy",
                     id="an unknown strategy (Kueue: NotSupported)"),
        pytest.param([{"input": "a"}, {"input": "a"}], "transformations[1].input: 'a' is given twice",
                     id="a repeated input (Kueue: Duplicate)"),
        pytest.param([{"input": "a", "outputs": {"b": "lots"}}], "outputs[b]",
                     id="an output that is no quantity"),
    ],
)
def test_the_configuration_refuses_bad_transformations(
    transformations: list[dict[str, object]], error: str
) -> None:
    with pytest.raises(ValidationError, match=error.replace("[", r"\[").replace("]", r"\]")):
        config.Resources.model_validate({"transformations": transformations})
