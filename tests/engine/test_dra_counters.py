"""Partitionable devices: requests counted by their counters (kqueue/engine/dra.py).

Ported from Kueue with its case names: ``TestComputeCounterCharges`` and
``TestGroupSlicesByPool`` (``pkg/dra/counters_test.go``), and the partitionable-device cases of
``test/integration/singlecluster/controller/dra/dra_pd_test.go`` run on the claim sizing (its
ResourceSlice, DeviceClasses and templates; the charge Kueue's test reads from the admission).
Not ported: Kueue's log-line test and the CEL compiler's error cases (kqueue reads a subset of
CEL, dra_cel.py; its own cases are below).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kqueue.api.config import Resources
from kqueue.engine import dra, from_api
from kqueue.engine.dra_cel import CelError, device_matches, device_view

from .builders import make_cq, make_engine, make_flavor, pending_reasons, t
from .test_dra import api_workload

Mi = 2**20
Gi = 2**30
MAX = 2**63 - 1
SOURCE = dra.CounterSource("gpu.memory", "gpu.nvidia.com", "memory", "true")


def device(name: str, profile: str, memory: str | None, **more: str) -> dict[str, Any]:
    """Kueue's makeDevice (and makeDeviceWithMultipleCounters with ``more``)."""
    dev: dict[str, Any] = {
        "name": name,
        "attributes": {"gpu.nvidia.com/profile": {"string": profile}},
    }
    if memory is not None:
        counters = {"memory": {"value": memory}, **{k: {"value": v} for k, v in more.items()}}
        dev["consumesCounters"] = [{"counterSet": "gpu-counter-set", "counters": counters}]
    return dev


CHARGES: dict[str, tuple[list[dict[str, Any]], int, int | None]] = {
    "single device, count=1": ([device("mig-1g10gb-0", "1g.10gb", "9856Mi")], 1, 9856 * Mi),
    "single device, count=3": ([device("mig-1g10gb-0", "1g.10gb", "9856Mi")], 3, 9856 * Mi * 3),
    "multiple devices same value, MAX is same": (
        [device(f"mig-1g10gb-{i}", "1g.10gb", "9856Mi") for i in range(3)],
        1,
        9856 * Mi,
    ),
    "multiple devices different values, MAX wins": (
        [device("mig-1g10gb-0", "1g.10gb", "9856Mi"), device("mig-3g40gb-0", "3g.40gb", "40Gi")],
        1,
        40 * Gi,
    ),
    "counter not in config, skipped": (
        [device("mig-1g10gb-0", "1g.10gb", "9856Mi", multiprocessors="14")],
        1,
        9856 * Mi,
    ),
    "multiple ConsumesCounters entries, MAX across counter sets": (
        [
            {
                "name": "multi-set-device",
                "consumesCounters": [
                    {"counterSet": "set-a", "counters": {"memory": {"value": "10Gi"}}},
                    {"counterSet": "set-b", "counters": {"memory": {"value": "30Gi"}}},
                ],
            }
        ],
        1,
        30 * Gi,
    ),
    "no consumesCounters, no deviceSelector": ([device("whole-gpu-0", "", None)], 1, None),
    "count multiplication saturates instead of overflowing int64": (
        [device("big-counter-0", "big", "8000000000000000000")],
        2,
        MAX,
    ),
    "counter that Value() would truncate is clamped before multiply": (
        [device("truncating-0", "big", "10000000000000000000")],
        2,
        MAX,
    ),
    "counter above int64 is clamped at count=1": (
        [device("overmax-0", "big", "9223372036854775808")],
        1,
        MAX,
    ),
    "negative counter is clamped to zero": ([device("negative-0", "big", "-5")], 2, 0),
    "fractional counter rounds up at count=1": ([device("fractional-0", "small", "500m")], 1, 1),
    "negative counter is clamped to zero at count=1": (
        [device("negative-count1-0", "big", "-5")],
        1,
        0,
    ),
    "sub-integer negative counter is clamped to zero": (
        [device("negative-fractional-0", "small", "-500m")],
        1,
        0,
    ),
}


@pytest.mark.parametrize("matched,count,want", CHARGES.values(), ids=CHARGES.keys())
def test_compute_counter_charges(
    matched: list[dict[str, Any]], count: int, want: int | None
) -> None:
    assert dra.counter_charge(SOURCE, matched, count) == want


def rslice(driver: str, pool: str, gen: int, count: int, *devices: str) -> dict[str, Any]:
    """Kueue's makeResourceSlice (the spec), one named device per entry to see which count."""
    return {
        "driver": driver,
        "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
        "devices": [{"name": d} for d in devices],
    }


POOLS: dict[str, tuple[list[dict[str, Any]], list[str]]] = {
    "single pool, complete": (
        [
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "a"),
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "b"),
        ],
        ["a", "b"],
    ),
    "single pool, incomplete": ([rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "a")], []),
    "two pools": (
        [
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "a"),
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "b"),
            rslice("gpu.nvidia.com", "node1-gpu1", 1, 2, "c"),
            rslice("gpu.nvidia.com", "node1-gpu1", 1, 2, "d"),
        ],
        ["a", "b", "c", "d"],
    ),
    "filter by driver": (
        [
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 1, "a"),
            rslice("net.example.com", "node1-net0", 1, 1, "n"),
        ],
        ["a"],
    ),
    "higher generation replaces older": (
        [
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "old1"),
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "old2"),
            rslice("gpu.nvidia.com", "node1-gpu0", 2, 2, "new1"),
            rslice("gpu.nvidia.com", "node1-gpu0", 2, 2, "new2"),
        ],
        ["new1", "new2"],
    ),
    "mixed generation, incomplete new": (
        [
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "old1"),
            rslice("gpu.nvidia.com", "node1-gpu0", 1, 2, "old2"),
            rslice("gpu.nvidia.com", "node1-gpu0", 2, 2, "new1"),
        ],
        [],
    ),
}


@pytest.mark.parametrize("slices,want", POOLS.values(), ids=POOLS.keys())
def test_group_slices_by_pool(slices: list[dict[str, Any]], want: list[str]) -> None:
    """Only the devices of complete pools of the newest generation count."""
    assert [d["name"] for d in dra.pool_devices(slices, "gpu.nvidia.com")] == want


# dra_pd_test.go's cluster: the mapping, the DeviceClasses and one pool of one slice.
MAPPING = Resources.model_validate(
    {
        "deviceClassMappings": [
            {
                "name": "gpu.memory",
                "deviceClassNames": ["gpu.example.com", "mig.example.com"],
                "sources": [
                    {
                        "counter": {
                            "name": "memory",
                            "driver": "gpu.example.com",
                            "deviceSelector": {
                                "cel": {"expression": "device.driver == 'gpu.example.com'"}
                            },
                        }
                    }
                ],
            }
        ]
    }
)
DEVICE_CLASSES = {
    "mig.example.com": {"spec": {"selectors": [
        {"cel": {"expression": "device.attributes['gpu.example.com'].type == 'mig'"}}
    ]}},
    "gpu.example.com": {"spec": {}},
}


def pd_device(name: str, kind: str, memory: str, profile: str | None = None) -> dict[str, Any]:
    attributes = {"type": {"string": kind}}
    if profile is not None:
        attributes["profile"] = {"string": profile}
    counters = {"memory": {"value": memory}}
    return {
        "name": name,
        "attributes": attributes,
        "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": counters}],
    }


def pd_slice(*devices: dict[str, Any], count: int = 1) -> dict[str, Any]:
    pool = {"name": "node1-gpu0", "generation": 1, "resourceSliceCount": count}
    return {"driver": "gpu.example.com", "pool": pool, "devices": list(devices)}


GPU0 = pd_device("gpu-0", "gpu", "40320Mi")
MIG_1G = [pd_device(f"gpu-0-mig-1g5gb-{i}", "mig", "4864Mi", "1g.5gb") for i in range(2)]
MIG_3G = pd_device("gpu-0-mig-3g20gb-0", "mig", "20Gi", "3g.20gb")
MIG_7G = pd_device("gpu-0-mig-7g40gb-0", "mig", "40320Mi", "7g.40gb")
PROFILE = "device.attributes['gpu.example.com'].profile"


def template(device_class: str, count: int, *cel: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in cel]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


@dataclass(frozen=True)
class Case:
    slices: list[dict[str, Any]]
    templates: dict[str, dict[str, Any]]
    want: dict[str, int] | None = None
    error: str = ""


PD_CASES = {
    "Should admit MIG workload with correct counter-based gpu.memory charge": Case(
        [pd_slice(GPU0, *MIG_1G, MIG_7G)],
        {"t": template("mig.example.com", 1, f"{PROFILE} == '1g.5gb'")},
        want={"gpu.memory": 4864 * Mi},
    ),
    "Should multiply counter charge by request count": Case(
        [pd_slice(GPU0, *MIG_1G)],
        {"t": template("mig.example.com", 2, f"{PROFILE} == '1g.5gb'")},
        want={"gpu.memory": 9728 * Mi},
    ),
    "Should charge MAX when CEL matches multiple profiles": Case(
        [pd_slice(GPU0, MIG_1G[0], MIG_3G)],
        {"t": template("mig.example.com", 1, f"{PROFILE} == '1g.5gb' || {PROFILE} == '3g.20gb'")},
        want={"gpu.memory": 20 * Gi},
    ),
    "Should mark workload inadmissible when CEL matches no devices": Case(
        [pd_slice(GPU0, MIG_1G[0])],
        {"t": template("mig.example.com", 1, f"{PROFILE} == 'nonexistent'")},
        error="insufficient matching devices for counter driver: 0 device(s) match but 1 requested",
    ),
    "Should admit workload with unified whole GPU and MIG charges": Case(
        [pd_slice(GPU0, MIG_1G[0])],
        {
            "t": template(
                "gpu.example.com", 1, "device.attributes['gpu.example.com'].type == 'gpu'"
            ),
            "u": template("mig.example.com", 1, f"{PROFILE} == '1g.5gb'"),
        },
        want={"gpu.memory": 40320 * Mi + 4864 * Mi},
    ),
    "Should mark workload inadmissible with incomplete pool": Case(
        [pd_slice(GPU0, *MIG_1G, count=2)],
        {"t": template("mig.example.com", 1, f"{PROFILE} == '1g.5gb'")},
        error="0 device(s) match but 1 requested",
    ),
    "Should charge consumesCounters for whole GPU request without CEL": Case(
        [pd_slice(GPU0)],
        {"t": template("gpu.example.com", 1)},
        want={"gpu.memory": 40320 * Mi},
    ),
    # kqueue's own: what the engine cannot size names the claim and the request.
    "unknown DeviceClass (no DeviceClass object)": Case(
        [pd_slice(GPU0)],
        {"t": template("mig.example.com", 1)},
        error="devices.requests[0]: DeviceClass mig.example.com not found",
    ),
    "a selector kqueue cannot evaluate": Case(
        [pd_slice(GPU0)],
        {"t": template("gpu.example.com", 1, "device.attributes.exists(a, a == 'x')")},
        error="exists() is not supported by kqueue",
    ),
}


@pytest.mark.parametrize("case", PD_CASES.values(), ids=PD_CASES.keys())
def test_partitionable_devices(case: Case) -> None:
    known = {} if "not found" in case.error else DEVICE_CLASSES
    claims = dra.DeviceClaims(
        case.templates, MAPPING.device_classes(), dra.counter_sources(MAPPING), case.slices, known
    )
    resource_claims = [{"name": n, "resourceClaimTemplateName": n} for n in case.templates]
    if case.error:
        with pytest.raises(dra.ClaimError) as raised:
            dra.pod_devices(resource_claims, claims.templates, claims.classes, claims)
        assert case.error in str(raised.value)
        assert "spec.resourceClaims[0] (ResourceClaimTemplate t)" in str(raised.value)
        return
    assert dra.pod_devices(resource_claims, claims.templates, claims.classes, claims) == {
        dra.ResourceName(k): v for k, v in (case.want or {}).items()
    }


CEL = {
    "driver": ("device.driver == 'gpu.example.com'", True),
    "attribute by bare name is in the driver's domain": (
        "device.attributes['gpu.example.com'].type == 'mig'",
        True,
    ),
    "index form and &&": (
        'device.attributes["gpu.example.com"]["profile"] == "1g.5gb" && true',
        True,
    ),
    "capacity compareTo quantity": (
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('20Gi')) == 0",
        True,
    ),
    "capacity less than": (
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('10Gi')) < 0",
        False,
    ),
    "not and parentheses": ("!(device.driver == 'x' || false)", True),
    "integer attribute": ("device.attributes['gpu.example.com'].index >= 2", True),
}


@pytest.mark.parametrize("expr,want", CEL.values(), ids=CEL.keys())
def test_cel_subset(expr: str, want: bool) -> None:
    dev = device_view(
        "gpu.example.com",
        {
            "attributes": {
                "type": {"string": "mig"},
                "profile": {"string": "1g.5gb"},
                "index": {"int": 2},
            },
            "capacity": {"memory": {"value": "20Gi"}},
        },
    )
    assert device_matches(expr, dev) is want


@pytest.mark.parametrize(
    "expr,message",
    [
        ("device.attributes['gpu.example.com'].missing == 'x'", "no such key: missing"),
        ("device.driver", "is not a boolean"),
        ("device.driver == 1", "cannot compare"),
        ("size(device.driver) > 1", "'size' is not supported by kqueue"),
        ("device.driver == 'a' &&", "ends early"),
    ],
)
def test_cel_errors_name_the_expression(expr: str, message: str) -> None:
    dev = device_view("gpu.example.com", {"attributes": {}})
    with pytest.raises(CelError) as raised:
        device_matches(expr, dev)
    assert message in str(raised.value)
    assert repr(expr) in str(raised.value)


def test_counter_charge_takes_quota_and_the_second_waits_naming_it() -> None:
    """In the engine: a partition counts its memory against ``gpu.memory``; a workload whose
    partition does not fit the rest waits for quota naming the resource."""
    claims = dra.DeviceClaims(
        {"t": template("mig.example.com", 1, f"{PROFILE} == '3g.20gb'")},
        MAPPING.device_classes(),
        dra.counter_sources(MAPPING),
        [pd_slice(GPU0, MIG_3G)],
        DEVICE_CLASSES,
    )
    engine = make_engine(
        make_flavor("default").obj(),
        make_cq("cq").quota("default", **{"cpu": "10", "gpu.memory": "30Gi"}).obj(),
    )
    claim = {"name": "g", "resourceClaimTemplateName": "t"}
    engine.upsert_workload(from_api.workload(api_workload("a", 1, claim), claims=claims))
    result = engine.schedule(t(1))
    [ps] = result.admitted[0].admission.pod_sets
    assert ps.resource_usage["gpu.memory"] == 20 * Gi
    engine.upsert_workload(from_api.workload(api_workload("bb", 1, claim), claims=claims))
    result = engine.schedule(t(2))
    assert pending_reasons(result) == {"bb": "WaitingForQuota"}
    assert "gpu.memory" in result.pending[0].message
