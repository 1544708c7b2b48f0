"""The integration registry is the one list of kinds: the Configuration's names, the webhooks
and the simulator all follow it."""

from __future__ import annotations

from kqueue.api.config import (
    DEFAULT_FRAMEWORKS,
    SUPPORTED_FRAMEWORKS,
    Configuration,
    default_managed_namespace_selector,
)
from kqueue.api.integrations.management import FRAMEWORK_OF
from kqueue.api.loader import PASSTHROUGH_KINDS
from kqueue.controller.integrations import frameworks
from kqueue.controller.webhooks.config import webhook_configurations


def test_every_registered_integration_is_a_configuration_name_and_back() -> None:
    assert sorted(f.name for f in frameworks()) == sorted(SUPPORTED_FRAMEWORKS)
    assert sorted(f.name for f in frameworks() if f.default_enabled) == sorted(DEFAULT_FRAMEWORKS)
    assert Configuration().integrations.frameworks == list(DEFAULT_FRAMEWORKS)


def test_kinds_simulate_accepts_are_the_registered_ones() -> None:
    simulated = {(f.api_version, f.kind) for f in frameworks() if f.simulate}
    assert simulated == set(FRAMEWORK_OF)
    assert simulated <= PASSTHROUGH_KINDS
    for fw in frameworks():
        if fw.simulate:
            assert FRAMEWORK_OF[(fw.api_version, fw.kind)] == fw.name


def test_each_webhook_is_routed_only_when_its_integration_is_enabled() -> None:
    selector = default_managed_namespace_selector("kqueue-system")
    for fw in frameworks():
        mutating, validating = webhook_configurations(
            namespace_selector=selector, base_url="https://127.0.0.1:9443", frameworks=[fw.name]
        )
        names = {h["name"] for cfg in (mutating, validating) for h in cfg["webhooks"]}
        assert {w.name for w in fw.webhooks} <= names
        others = {w.name for f in frameworks() if f is not fw for w in f.webhooks}
        assert not (others & names), f"{fw.name}: {sorted(others & names)}"
        # The generic pod webhook and the kqueue.io kinds' are always there.
        assert {"mpod.kqueue.io", "vkqueue.kqueue.io"} <= names
