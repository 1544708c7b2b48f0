"""``resources.deviceClassMappings`` (DRA quota): kqueue's Configuration and Kueue's.

Ported from Kueue's ``TestValidate`` (``pkg/config/validation_test.go``) where it checks
``validateDeviceClassMappings``; the counter-source cases are not ported (counter sources are
dropped on import, see docs/dra.md).
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


BAD = {
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


def test_kueue_configuration_keeps_device_class_mappings_and_drops_the_rest() -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "excludeResourcePrefixes": ["example.com/"],
            "deviceClassMappings": [
                {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com"],
                 "sources": [{"counter": {"driver": "gpu.nvidia.com", "name": "memory"}}]},
            ],
        },
    }
    out, warnings = from_kueue_configuration(doc, ("batch/job",))
    assert out["resources"] == {"deviceClassMappings": [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com"]},
    ]}
    assert sorted(w.path for w in warnings) == [
        "resources.deviceClassMappings[1].sources", "resources.excludeResourcePrefixes"
    ]
    cfg = Configuration.model_validate(out)
    assert cfg.resources.device_classes()["mig.nvidia.com"] == "nvidia.com/mig"
