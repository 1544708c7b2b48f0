"""``resources.deviceClassMappings`` (DRA quota): kqueue's Configuration and Kueue's.

Ported from Kueue's ``TestValidate`` (``pkg/config/validation_test.go``) where it checks
``validateDeviceClassMappings``, with its counter-source cases (partitionable devices); the
capacity-source cases are not (capacity sources are dropped on import, see docs/dra.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kqueue.api.config import Configuration
from kqueue.api.kueue_config import from_kueue_configuration


def config(*mappings: dict[str, Any]) -> Configuration:
    return Configuration.model_validate({"resources": {"deviceClassMappings": list(mappings)}})


def test_mapping_maps_each_device_class_to_its_resource() -> None:
    c = config(
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com", "gpu.example.com"]},
        {"name": "example.com/fpga", "deviceClassNames": ["fpga.example.com"]},
    )
    assert c.resources.device_classes() == {
        "gpu.nvidia.com": "nvidia.com/gpu",
        "gpu.example.com": "nvidia.com/gpu",
        "fpga.example.com": "example.com/fpga",
    }
    assert Configuration().resources.device_classes() == {}


def counter(name: str, driver: str = "gpu.nvidia.com", **extra: Any) -> dict[str, Any]:
    """Kueue's DeviceClassCounterSource as its tests write it."""
    selector = {"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}
    return {"name": name, "driver": driver, "deviceSelector": selector, **extra}


def counted(name: str, device_class: str, *counters: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "deviceClassNames": [device_class],
            "sources": [{"counter": c} for c in counters]}


GOOD_SOURCES = {
    "valid counter source on deviceClassMapping": [
        counted("gpu.memory", "mig.nvidia.com", counter("memory"))
    ],
    "multi-counter: same DeviceClass with different counter names allowed": [
        counted("gpu.memory", "mig.nvidia.com", counter("memory")),
        counted("gpu.compute", "mig.nvidia.com", counter("multiprocessors")),
    ],
    "sources: multiple counter entries valid": [
        counted("gpu.memory", "mig.nvidia.com", counter("memory"), counter("memory-2")),
    ],
}


@pytest.mark.parametrize("mappings", GOOD_SOURCES.values(), ids=GOOD_SOURCES.keys())
def test_counter_sources_are_accepted(mappings: list[dict[str, Any]]) -> None:
    c = config(*mappings)
    assert c.resources.device_classes() == {"mig.nvidia.com": "gpu.memory"}
    assert [s.counter.name for m in c.resources.device_class_mappings for s in m.sources] == [
        s["counter"]["name"] for m in mappings for s in m["sources"]
    ]


BAD = {
    "multi-counter: same DeviceClass with same counter name rejected": (
        [counted("gpu.memory", "mig.nvidia.com", counter("memory")),
         counted("gpu.memory2", "mig.nvidia.com", counter("memory"))],
        "deviceClassMappings[1].deviceClassNames[0]: device class 'mig.nvidia.com' already has "
        "a counter source for counter 'memory'",
    ),
    "multi-counter: whole-device and counter for same DeviceClass rejected": (
        [{"name": "gpu", "deviceClassNames": ["gpu.nvidia.com"]},
         counted("gpu.memory", "gpu.nvidia.com", counter("memory"))],
        "deviceClassMappings[1].deviceClassNames[0]: device class 'gpu.nvidia.com' already "
        "mapped to resource gpu",
    ),
    "multi-counter: counter then whole-device for same DeviceClass rejected": (
        [counted("gpu.memory", "gpu.nvidia.com", counter("memory")),
         {"name": "gpu", "deviceClassNames": ["gpu.nvidia.com"]}],
        "deviceClassMappings[1].deviceClassNames[0]: device class 'gpu.nvidia.com' already "
        "mapped to resource gpu.memory",
    ),
    "sources: missing driver": (
        [counted("gpu.memory", "mig.nvidia.com",
                 {k: v for k, v in counter("memory").items() if k != "driver"})],
        "sources.0.counter.driver\n  Field required",
    ),
    "sources: missing name": (
        [counted("gpu.memory", "mig.nvidia.com",
                 {k: v for k, v in counter("memory").items() if k != "name"})],
        "sources.0.counter.name\n  Field required",
    ),
    "sources: invalid counter name format": (
        [counted("gpu.memory", "mig.nvidia.com", counter("Memory_1"))],
        "name: 'Memory_1' is not a DNS label",
    ),
    "sources: invalid driver name format": (
        [counted("gpu.memory", "mig.nvidia.com", counter("memory", driver="GPU_driver"))],
        "driver: 'GPU_driver' is not a DNS subdomain of at most 63 characters",
    ),
    "sources: driver name exceeds max length": (
        [counted("gpu.memory", "mig.nvidia.com", counter("memory", driver="a" * 64))],
        "is not a DNS subdomain of at most 63 characters",
    ),
    "sources: missing deviceSelector": (
        [counted("gpu.memory", "mig.nvidia.com",
                 {k: v for k, v in counter("memory").items() if k != "deviceSelector"})],
        "sources.0.counter.deviceSelector\n  Field required",
    ),
    "invalid resource name": (
        [{"name": "not a name", "deviceClassNames": ["gpu.nvidia.com"]}],
        "name: 'not a name' is not a qualified name",
    ),
    "empty deviceClassNames": (
        [{"name": "nvidia.com/gpu", "deviceClassNames": []}],
        "deviceClassNames: 0 given; allowed: 1 to 8",
    ),
    "too many deviceClassNames": (
        [{"name": "nvidia.com/gpu", "deviceClassNames": [f"c{i}" for i in range(9)]}],
        "deviceClassNames: 9 given; allowed: 1 to 8",
    ),
    "invalid device class name": (
        [{"name": "nvidia.com/gpu", "deviceClassNames": ["-bad"]}],
        "deviceClassNames[0]: '-bad' is not a qualified name",
    ),
    "duplicate device class in one mapping": (
        [{"name": "nvidia.com/gpu", "deviceClassNames": ["a", "a"]}],
        "deviceClassNames[1]: 'a' is given twice",
    ),
    "duplicate resource name": (
        [{"name": "r", "deviceClassNames": ["a"]}, {"name": "r", "deviceClassNames": ["b"]}],
        "deviceClassMappings[1].name: 'r' is given twice",
    ),
    "multi-counter: whole-device and counter for same DeviceClass rejected (without counters)": (
        [{"name": "r1", "deviceClassNames": ["a"]}, {"name": "r2", "deviceClassNames": ["a"]}],
        "deviceClassMappings[1].deviceClassNames[0]: device class 'a' already mapped to resource r1",
    ),
    "too many mappings": (
        [{"name": f"r{i}", "deviceClassNames": [f"c{i}"]} for i in range(17)],
        "deviceClassMappings: 17 given; allowed: at most 16",
    ),
}


@pytest.mark.parametrize("mappings,message", BAD.values(), ids=BAD.keys())
def test_bad_mapping_names_the_field(mappings: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        config(*mappings)
    assert message in str(raised.value)


def test_kueue_configuration_keeps_mappings_and_transformations_and_drops_the_rest() -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "quotaCheckStrategy": "BlockUndeclared",
            "excludeResourcePrefixes": ["example.com/"],
            "transformations": [{"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace",
                                 "outputs": {"example.com/credits": "10"}}],
            "deviceClassMappings": [
                {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com"],
                 "sources": [{"counter": counter("memory")},
                             {"capacity": {"name": "gpu.nvidia.com/memory",
                                           "driver": "gpu.nvidia.com"}}]},
            ],
        },
    }
    out, warnings = from_kueue_configuration(doc, ("batch/job",))
    assert out["resources"] == {
        "excludeResourcePrefixes": ["example.com/"],
        "transformations": [{"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace",
                             "outputs": {"example.com/credits": "10"}}],
        "deviceClassMappings": [
            {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
            {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com"],
             "sources": [{"counter": counter("memory")}]},
        ],
    }
    assert sorted(w.path for w in warnings) == [
        "resources.deviceClassMappings[1].sources[1].capacity",
        "resources.quotaCheckStrategy",
    ]
    cfg = Configuration.model_validate(out)
    assert cfg.resources.device_classes()["mig.nvidia.com"] == "nvidia.com/mig"
    assert cfg.resources.exclude_resource_prefixes == ["example.com/"]
    assert cfg.resources.transformations[0].strategy == "Replace"


def test_kueue_dra_gates_are_honoured_and_said_so() -> None:
    from kqueue.api import feature_gates

    on = {"KueueDRAIntegration": True, "KueueDRAIntegrationPartitionableDevices": True,
          "KueueDRAIntegrationExtendedResource": True}
    assert feature_gates.warnings(on) == []
    assert feature_gates.honoured(on) == []
    # Off: honoured (docs/dra.md), so no warning, and the note says what kqueue then does.
    off = {"KueueDRAIntegrationExtendedResource": False}
    assert feature_gates.warnings(off) == []
    assert feature_gates.honoured(off) == [
        "featureGates.KueueDRAIntegrationExtendedResource: false, honoured: an extended "
        "resource a DeviceClass serves is counted as a container request under its own name"
    ]
    assert feature_gates.honoured(
        {"KueueDRAIntegration": False, "KueueDRARejectWorkloadsWhenDRADisabled": False}
    ) == [
        "featureGates.KueueDRAIntegration: false, honoured: DRA device claims take no quota; "
        "a workload's ResourceClaims are ignored",
        "featureGates.KueueDRARejectWorkloadsWhenDRADisabled: false, honoured: with "
        "KueueDRAIntegration off, a workload's device claims are ignored instead of making it "
        "Misconfigured",
    ]
    assert feature_gates.warnings({"KueueDRAIntegrationConsumableCapacity": True}) == [
        "featureGates.KueueDRAIntegrationConsumableCapacity: kqueue always behaves as if it "
        "were false; true ignored"
    ]


def test_every_honoured_gate_says_what_turning_it_off_does() -> None:
    from kqueue.api import feature_gates

    assert set(feature_gates.OFF_EFFECT) == set(feature_gates.HONOURED)
    assert all(feature_gates.HONOURED.values())  # so "off" is always against the default


def test_counter_sources_need_the_partitionable_devices_gate() -> None:
    from kqueue.api.config import ConfigurationError, parse_configuration

    mapping = {
        "name": "gpu.memory",
        "deviceClassNames": ["gpu.example.com"],
        "sources": [{"counter": {
            "name": "memory", "driver": "gpu.example.com",
            "deviceSelector": {"cel": {"expression": "device.driver == 'gpu.example.com'"}},
        }}],
    }
    doc = {"resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu",
                                                  "deviceClassNames": ["a.example.com"]},
                                                 mapping]}}
    assert parse_configuration(doc).resources.device_class_mappings[1].sources
    with pytest.raises(ConfigurationError, match=(
        r"resources\.deviceClassMappings\[1\]\.sources\[0\]\.counter: counter sources "
        r"require KueueDRAIntegrationPartitionableDevices to be enabled"
    )):
        parse_configuration(
            {**doc, "featureGates": {"KueueDRAIntegrationPartitionableDevices": False}}
        )
