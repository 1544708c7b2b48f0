"""The integration registry is the one list of kinds: the Configuration's names, the webhooks
and the simulator all follow it."""

from __future__ import annotations

import pytest

from kqueue.api.config import (
    DEFAULT_FRAMEWORKS,
    SUPPORTED_FRAMEWORKS,
    Configuration,
    default_managed_namespace_selector,
)
from kqueue.api.integrations.management import FRAMEWORK_OF
from kqueue.api.integrations.registry import BY_FRAMEWORK, INTEGRATIONS
from kqueue.api.loader import PASSTHROUGH_KINDS
from kqueue.controller.integrations import frameworks, get
from kqueue.controller.integrations.registry import register
from kqueue.controller.webhooks.config import webhook_configurations


def test_every_registered_integration_is_a_configuration_name_and_back() -> None:
    assert sorted(f.name for f in frameworks()) == sorted(SUPPORTED_FRAMEWORKS)
    assert sorted(f.name for f in frameworks() if f.default_enabled) == sorted(DEFAULT_FRAMEWORKS)
    assert Configuration().integrations.frameworks == list(DEFAULT_FRAMEWORKS)


def test_kinds_simulate_accepts_are_the_registered_ones() -> None:
    registered = {(f.api_version, f.kind) for f in frameworks()}
    assert registered == set(FRAMEWORK_OF)
    assert registered <= PASSTHROUGH_KINDS
    for fw in frameworks():
        assert FRAMEWORK_OF[(fw.api_version, fw.kind)] == fw.name


def test_every_declared_kind_has_its_controller_half_and_no_other() -> None:
    # One list of kinds: the controller registers exactly the API-level declarations, each
    # Framework carrying the very declaration the API registry lists.
    assert [i.framework for i in INTEGRATIONS] == list(SUPPORTED_FRAMEWORKS)
    assert {f.name: f.declares for f in frameworks()} == {i.framework: i for i in INTEGRATIONS}
    for fw in frameworks():
        assert fw.declares is BY_FRAMEWORK[fw.name]


def test_a_framework_without_a_declaration_is_refused() -> None:
    from dataclasses import replace

    job = get("batch/job")
    stray = replace(job, declares=replace(job.declares, framework="example.com/widget"))
    with pytest.raises(ValueError, match=r"example\.com/widget.*not declared"):
        register(stray)
    assert "example.com/widget" not in {f.name for f in frameworks()}


def test_config_needs_and_defaults_follow_the_declarations() -> None:
    from kqueue.api.config import FRAMEWORK_NEEDS

    assert {i.framework: i.needs for i in INTEGRATIONS if i.needs} == FRAMEWORK_NEEDS
    for name, needs in FRAMEWORK_NEEDS.items():
        with pytest.raises(ValueError, match=f"{name!r} needs {needs[0]!r}"):
            Configuration.model_validate({"integrations": {"frameworks": [name]}})


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


def test_each_declared_operator_is_one_make_run_starts() -> None:
    # The declaration names the operator as `make run OPERATORS=...` does, so the docs' "needs"
    # column is a command a person can run.
    from kqueue.localcluster.operators import OPERATORS

    declared = {i.operator for i in INTEGRATIONS if i.operator is not None}
    assert declared and declared <= set(OPERATORS)
    # A kind on by default never waits on an operator a cluster may lack.
    assert all(i.operator is None for i in INTEGRATIONS if i.default_enabled)
