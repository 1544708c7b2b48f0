"""The chart's schema of `config` is the controller's: Helm refuses what the controller refuses.

values.schema.json's `config` property is generated from the Configuration model
(kqueue/api/config_schema.py, hack/gen-chart-schema.py). These tests check that the committed
file is what the generator writes, and compare Helm's verdict (the real validator, in the helm
binary the repository builds) with the controller's own validation on a table of configurations.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, field_validator

from kqueue.api.config import (
    Configuration,
    ConfigurationError,
    configuration_to_dict,
    load_configuration,
    parse_configuration,
)
from kqueue.api.config_schema import (
    VALIDATOR_RULES,
    UnmappedValidatorError,
    configuration_json_schema,
    validator_names,
)
from tests.chart.conftest import CHART, ROOT, Helm

Obj = dict[str, Any]
SCHEMA = CHART / "values.schema.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_chart_schema", ROOT / "hack" / "gen-chart-schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_values_schema_is_generated_from_the_model() -> None:
    current = SCHEMA.read_text()
    assert _generator().render(current) == current, (
        "charts/kqueue/values.schema.json is out of date with kqueue/api/config.py: "
        "run `make config-docs`"
    )


def test_generator_refuses_a_validator_it_cannot_describe() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str = "x"

        @field_validator("name")
        @classmethod
        def _no_spaces(cls, value: str) -> str:
            if " " in value:
                raise ValueError("no spaces")
            return value

    with pytest.raises(UnmappedValidatorError, match=r"Strict\._no_spaces.*VALIDATOR_RULES"):
        configuration_json_schema(Strict)


def test_every_validator_rule_belongs_to_the_model() -> None:
    """An entry whose validator was renamed or removed is stale."""
    stale = set(VALIDATOR_RULES) - validator_names()
    assert not stale, f"VALIDATOR_RULES names validators the model does not have: {stale}"


# ---------------------------------------------------------------------------------------------
# Helm's verdict against the controller's, on the bare config schema
# ---------------------------------------------------------------------------------------------

LONG = "a" * 63

# (name, config, valid): both the controller and Helm must give the verdict `valid`.
AGREED: list[tuple[str, Obj, bool]] = [
    ("empty", {}, True),
    ("chart-defaults", yaml.safe_load((CHART / "values.yaml").read_text())["config"], True),
    ("every-field-at-its-default", configuration_to_dict(Configuration()), True),
    (
        "wait-for-pods-ready-everything-set",
        {
            "waitForPodsReady": {
                "enable": True,
                "timeout": "10m",
                "blockAdmission": False,
                "recoveryTimeout": "1m30s",
                "requeuingStrategy": {
                    "timestamp": "Creation",
                    "backoffBaseSeconds": 10,
                    "backoffMaxSeconds": 100,
                    "backoffLimitCount": 0,
                },
            }
        },
        True,
    ),
    ("duration-with-fraction-and-plus", {"waitForPodsReady": {"timeout": "+1.5h"}}, True),
    ("duration-micro-sign", {"waitForPodsReady": {"timeout": "1500µs"}}, True),
    ("duration-zero-part-then-nonzero", {"waitForPodsReady": {"timeout": "0h5m"}}, True),
    ("duration-fraction-only", {"waitForPodsReady": {"timeout": ".5s"}}, True),
    (
        "leader-election-custom",
        {
            "leaderElection": {
                "leaseDuration": "30s",
                "renewDeadline": "20s",
                "retryPeriod": "5s",
                "resourceNamespace": "elsewhere",
            }
        },
        True,
    ),
    ("qps-zero-burst-zero", {"clientConnection": {"qps": 0, "burst": 0}}, True),
    ("qps-negative-burst-zero", {"clientConnection": {"qps": -1, "burst": 0}}, True),
    ("bind-address-disabled", {"health": {"bindAddress": "0"}}, True),
    ("bind-address-ipv6", {"metrics": {"bindAddress": "[::1]:8080"}}, True),
    ("bind-address-host-max-port", {"metrics": {"bindAddress": "127.0.0.1:65535"}}, True),
    ("namespace-63-characters", {"namespace": LONG}, True),
    ("frameworks-empty", {"integrations": {"frameworks": []}}, True),
    (
        "namespace-selector-every-operator",
        {
            "managedJobsNamespaceSelector": {
                "matchLabels": {"team": "batch"},
                "matchExpressions": [
                    {"key": "a", "operator": "In", "values": ["x"]},
                    {"key": "b", "operator": "NotIn", "values": ["y", "z"]},
                    {"key": "c", "operator": "Exists"},
                    {"key": "d", "operator": "DoesNotExist", "values": []},
                ],
            }
        },
        True,
    ),
    ("logging-every-field", {"logging": {"format": "text", "level": "warning"}}, True),
    # Unknown keys, anywhere.
    ("unknown-top-level-field", {"noSuchField": 1}, False),
    ("unknown-nested-field-typo", {"waitForPodsReady": {"enabled": True}}, False),
    (
        "unknown-field-in-selector-term",
        {
            "managedJobsNamespaceSelector": {
                "matchExpressions": [{"key": "a", "operator": "Exists", "value": "x"}]
            }
        },
        False,
    ),
    # Wrong types: the model is strict, YAML already types its scalars.
    ("bool-as-word", {"waitForPodsReady": {"enable": "notabool"}}, False),
    ("bool-as-string", {"manageJobsWithoutQueueName": "true"}, False),
    ("bool-as-null", {"waitForPodsReady": {"enable": None}}, False),
    ("int-as-string", {"clientConnection": {"qps": "50"}}, False),
    (
        "int-as-fraction",
        {"waitForPodsReady": {"requeuingStrategy": {"backoffBaseSeconds": 1.5}}},
        False,
    ),
    ("int-as-bool", {"clientConnection": {"burst": True}}, False),
    ("object-as-string", {"logging": "json"}, False),
    ("list-as-string", {"integrations": {"frameworks": "pod"}}, False),
    (
        "label-value-not-a-string",
        {"managedJobsNamespaceSelector": {"matchLabels": {"a": 1}}},
        False,
    ),
    ("duration-as-number", {"waitForPodsReady": {"timeout": 300}}, False),
    ("duration-unknown-unit", {"waitForPodsReady": {"timeout": "5x"}}, False),
    ("duration-no-unit", {"leaderElection": {"retryPeriod": "5"}}, False),
    # Enums and constants.
    ("logging-level-unknown", {"logging": {"level": "verbose"}}, False),
    ("logging-format-unknown", {"logging": {"format": "yaml"}}, False),
    (
        "requeue-timestamp-unknown",
        {"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Admission"}}},
        False,
    ),
    ("kind-other", {"kind": "Config"}, False),
    ("api-version-other", {"apiVersion": "config.kueue.x-k8s.io/v1beta1"}, False),
    (
        "selector-operator-unknown",
        {
            "managedJobsNamespaceSelector": {
                "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]
            }
        },
        False,
    ),
    ("framework-unknown", {"integrations": {"frameworks": ["batch/job", "no.such/kind"]}}, False),
    # Bounds and the rules the model states in code.
    ("webhook-port-zero", {"webhook": {"port": 0}}, False),
    ("webhook-port-too-big", {"webhook": {"port": 65536}}, False),
    ("lease-name-empty", {"leaderElection": {"resourceName": ""}}, False),
    (
        "backoff-base-zero",
        {"waitForPodsReady": {"requeuingStrategy": {"backoffBaseSeconds": 0}}},
        False,
    ),
    (
        "backoff-limit-negative",
        {"waitForPodsReady": {"requeuingStrategy": {"backoffLimitCount": -1}}},
        False,
    ),
    ("timeout-zero", {"waitForPodsReady": {"timeout": "0s"}}, False),
    ("timeout-bare-zero", {"waitForPodsReady": {"timeout": "0"}}, False),
    ("timeout-zero-in-two-units", {"waitForPodsReady": {"timeout": "0m0.0s"}}, False),
    ("timeout-negative", {"waitForPodsReady": {"timeout": "-5m"}}, False),
    ("recovery-timeout-zero", {"waitForPodsReady": {"recoveryTimeout": "0ms"}}, False),
    ("bind-address-without-port", {"health": {"bindAddress": "localhost"}}, False),
    ("bind-address-port-too-big", {"metrics": {"bindAddress": ":65536"}}, False),
    ("bind-address-two-colons", {"metrics": {"bindAddress": "a:b:80"}}, False),
    ("namespace-uppercase", {"namespace": "Kqueue"}, False),
    ("namespace-64-characters", {"namespace": LONG + "a"}, False),
    ("namespace-ends-with-dash", {"namespace": "kqueue-"}, False),
    ("framework-listed-twice", {"integrations": {"frameworks": ["pod", "pod"]}}, False),
    (
        "selector-in-without-values",
        {"managedJobsNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
        False,
    ),
    (
        "selector-notin-empty-values",
        {
            "managedJobsNamespaceSelector": {
                "matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]
            }
        },
        False,
    ),
    (
        "selector-exists-with-values",
        {
            "managedJobsNamespaceSelector": {
                "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
            }
        },
        False,
    ),
    (
        "selector-empty-key",
        {"managedJobsNamespaceSelector": {"matchExpressions": [{"key": "", "operator": "Exists"}]}},
        False,
    ),
    (
        "selector-without-operator",
        {"managedJobsNamespaceSelector": {"matchExpressions": [{"key": "a"}]}},
        False,
    ),
    ("burst-zero-with-default-qps", {"clientConnection": {"burst": 0}}, False),
    ("burst-zero-with-positive-qps", {"clientConnection": {"qps": 10, "burst": 0}}, False),
]

# Where the two deliberately differ: (name, config, controller accepts, helm accepts, why).
# The validator names tie the controller-only rules of VALIDATOR_RULES to a case each.
KNOWN_DIFFERENCES: list[tuple[str, Obj, bool, bool, str]] = [
    (
        "snake-case-field-names",
        {"wait_for_pods_ready": {"enable": True}},
        True,
        False,
        "the chart reads camelCase names (managedJobsNamespaceSelector, integrations) to shape "
        "its webhooks and RBAC, so it accepts only those",
    ),
    (
        "lease-duration-not-whole-seconds",
        {"leaderElection": {"leaseDuration": "15500ms"}},
        False,
        True,
        "LeaderElection._check_timings",
    ),
    (
        "renew-deadline-not-shorter-than-lease",
        {"leaderElection": {"leaseDuration": "15s", "renewDeadline": "15s"}},
        False,
        True,
        "LeaderElection._check_timings",
    ),
    (
        "backoff-max-below-base",
        {
            "waitForPodsReady": {
                "requeuingStrategy": {"backoffBaseSeconds": 100, "backoffMaxSeconds": 10}
            }
        },
        False,
        True,
        "RequeuingStrategy._check_backoff",
    ),
    (
        "device-class-mapping-name-not-qualified",
        {"resources": {"deviceClassMappings": [{"name": "a b", "deviceClassNames": ["g"]}]}},
        False,
        True,
        "DeviceClassMapping._check_names",
    ),
    (
        "device-class-counter-name-not-a-dns-label",
        {
            "resources": {
                "deviceClassMappings": [
                    {
                        "name": "gpu.memory",
                        "deviceClassNames": ["mig.example.com"],
                        "sources": [
                            {
                                "counter": {
                                    "name": "Memory Slices",
                                    "driver": "gpu.example.com",
                                    "deviceSelector": {"cel": {"expression": "true"}},
                                }
                            }
                        ],
                    }
                ]
            }
        },
        False,
        True,
        "DeviceClassCounterSource._check",
    ),
    (
        "counter-sources-with-partitionable-devices-off",
        {
            "featureGates": {"KueueDRAIntegrationPartitionableDevices": False},
            "resources": {
                "deviceClassMappings": [
                    {
                        "name": "gpu.memory",
                        "deviceClassNames": ["mig.example.com"],
                        "sources": [
                            {
                                "counter": {
                                    "name": "memory-slices",
                                    "driver": "gpu.example.com",
                                    "deviceSelector": {"cel": {"expression": "true"}},
                                }
                            }
                        ],
                    }
                ]
            },
        },
        False,
        True,
        "Configuration._counter_sources_gated",
    ),
    (
        "transformation-output-not-a-quantity",
        {"resources": {"transformations": [{"input": "a", "outputs": {"b": "lots"}}]}},
        False,
        True,
        "ResourceTransformation._check",
    ),
    (
        "transformation-input-twice",
        {"resources": {"transformations": [{"input": "a"}, {"input": "a"}]}},
        False,
        True,
        "Resources._check_transformations",
    ),
    (
        "device-class-mapped-twice",
        {"resources": {"deviceClassMappings": [{"name": "r1", "deviceClassNames": ["g"]},
                                               {"name": "r2", "deviceClassNames": ["g"]}]}},
        False,
        True,
        "Resources._check_mappings",
    ),
    (
        "duration-finer-than-a-microsecond",
        {"waitForPodsReady": {"timeout": "1ns"}},
        False,
        True,
        "_duration_input",
    ),
]


def controller_accepts(config: Obj) -> bool:
    try:
        parse_configuration(config)
    except ConfigurationError:
        return False
    return True


@pytest.fixture(scope="module")
def schema_only_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A chart whose whole schema is the generated `config` schema, with no defaults to merge."""
    chart = tmp_path_factory.mktemp("config-schema") / "config-schema"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: config-schema\nversion: 0.1.0\n")
    schema = json.loads(SCHEMA.read_text())
    (chart / "values.schema.json").write_text(
        json.dumps(
            {
                "$schema": schema["$schema"],
                "type": "object",
                "properties": {"config": schema["properties"]["config"]},
            }
        )
    )
    return chart


def helm_verdicts(
    helm: Helm, chart: Path, configs: list[Obj]
) -> list[subprocess.CompletedProcess[str]]:
    def one(config: Obj) -> subprocess.CompletedProcess[str]:
        # JSON (a subset of YAML) so that no string is re-read as a YAML 1.1 boolean ("y").
        path = chart.parent / f"values-{id(config)}.json"
        path.write_text(json.dumps({"config": config}, ensure_ascii=False))
        return helm.run("lint", "--strict", str(chart), "-f", str(path), check=False)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, configs))


def test_helm_and_the_controller_agree(helm: Helm, schema_only_chart: Path) -> None:
    results = helm_verdicts(helm, schema_only_chart, [c for _, c, _ in AGREED])
    wrong = []
    for (name, config, valid), res in zip(AGREED, results, strict=True):
        controller, by_helm = controller_accepts(config), res.returncode == 0
        if (controller, by_helm) != (valid, valid):
            wrong.append(
                f"{name}: expected {valid}, controller {controller}, helm {by_helm}: "
                f"{res.stdout.strip()[-300:]}"
            )
    assert not wrong, "\n".join(wrong)
    assert len({name for name, _, _ in AGREED}) == len(AGREED)


def test_known_differences_are_exactly_these(helm: Helm, schema_only_chart: Path) -> None:
    results = helm_verdicts(helm, schema_only_chart, [c for _, c, _, _, _ in KNOWN_DIFFERENCES])
    for (name, config, controller, by_helm, _), res in zip(KNOWN_DIFFERENCES, results, strict=True):
        assert controller_accepts(config) is controller, name
        assert (res.returncode == 0) is by_helm, f"{name}: {res.stdout}"
    # Every rule the schema leaves to the controller has a case above.
    covered = {why for *_, why in KNOWN_DIFFERENCES}
    controller_only = {name for name, rule in VALIDATOR_RULES.items() if rule.controller_only}
    assert controller_only <= covered, f"add a case for {controller_only - covered}"


# ---------------------------------------------------------------------------------------------
# Through the real chart: what a user types, and what the controller then reads
# ---------------------------------------------------------------------------------------------


def template_set(
    helm: Helm, *sets: str, skip_schema: bool = False
) -> subprocess.CompletedProcess[str]:
    args = ["template", "kqueue", str(CHART), "--namespace", "kqueue-system"]
    for s in sets:
        args += ["--set", s]
    if skip_schema:
        args.append("--skip-schema-validation")
    return helm.run(*args, check=False)


def rendered_configuration(stdout: str) -> str:
    for doc in yaml.safe_load_all(stdout):
        if doc and doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "kqueue-config":
            text: str = doc["data"]["controller_config.yaml"]
            return text
    raise AssertionError("no kqueue-config ConfigMap rendered")


# (name, --set arguments, the path Helm names in its message)
REFUSED_BY_THE_CHART: list[tuple[str, tuple[str, ...], str]] = [
    ("unknown-key", ("config.noSuchField=1",), "'noSuchField' not allowed"),
    ("wrong-type", ("config.waitForPodsReady.enable=notabool",), "/config/waitForPodsReady/enable"),
    ("enum", ("config.logging.level=verbose",), "/config/logging/level"),
    (
        "unknown-framework",
        ("config.integrations.frameworks={batch/job,no.such/kind}",),
        "/config/integrations/frameworks/1",
    ),
    (
        "zero-timeout",
        ("config.waitForPodsReady.enable=true", "config.waitForPodsReady.timeout=0s"),
        "/config/waitForPodsReady/timeout",
    ),
    (
        "selector-in-without-values",
        (
            "config.managedJobsNamespaceSelector.matchExpressions[0].key=team",
            "config.managedJobsNamespaceSelector.matchExpressions[0].operator=In",
        ),
        "/config/managedJobsNamespaceSelector/matchExpressions/0",
    ),
]


@pytest.mark.parametrize(
    ("name", "sets", "message"), REFUSED_BY_THE_CHART, ids=[c[0] for c in REFUSED_BY_THE_CHART]
)
def test_chart_refuses_what_the_controller_would_crashloop_on(
    helm: Helm, name: str, sets: tuple[str, ...], message: str
) -> None:
    res = template_set(helm, *sets)
    assert res.returncode != 0, f"{name}: helm rendered an invalid config"
    assert "values don't meet the specifications of the schema" in res.stderr
    assert message in res.stderr, res.stderr
    lint = helm.run(
        "lint", "--strict", str(CHART), *[a for s in sets for a in ("--set", s)], check=False
    )
    assert lint.returncode != 0, lint.stdout
    # Without the schema, the chart renders a ConfigMap the controller refuses at start-up.
    unchecked = template_set(helm, *sets, skip_schema=True)
    assert unchecked.returncode == 0, unchecked.stderr
    with pytest.raises(ConfigurationError):
        load_configuration(rendered_configuration(unchecked.stdout))


def test_fair_sharing_is_accepted_exactly_when_the_model_has_it(helm: Helm) -> None:
    """The issue's report (`config.fairSharing.enable=true` rendered, then crashlooped)."""
    res = template_set(helm, "config.fairSharing.enable=true")
    controller = controller_accepts({"fairSharing": {"enable": True}})
    assert (res.returncode == 0) is controller, res.stderr
    if not controller:
        # Refused as the model refuses it: no fairSharing section, or no `enable` in it
        # (Kueue's v1beta2 fairSharing has only preemptionStrategies: the section's presence
        # turns fair sharing on).
        assert "'fairSharing' not allowed" in res.stderr or "'enable' not allowed" in res.stderr


ACCEPTED_BY_THE_CHART: list[tuple[str, tuple[str, ...], Callable[[Configuration], bool]]] = [
    ("defaults", (), lambda c: c.logging.format == "json"),
    (
        "wait-for-pods-ready",
        ("config.waitForPodsReady.enable=true", "config.waitForPodsReady.timeout=10m"),
        lambda c: c.wait_for_pods_ready.enable and c.wait_for_pods_ready.timeout.seconds == 600,
    ),
    (
        "jobs-only",
        ("config.integrations.frameworks={batch/job}",),
        lambda c: c.integrations.frameworks == ["batch/job"],
    ),
    (
        "throttling-off",
        ("config.clientConnection.qps=0", "config.clientConnection.burst=0"),
        lambda c: c.client_connection.qps == 0,
    ),
    ("debug-logs", ("config.logging.level=debug",), lambda c: c.logging.level == "debug"),
]


@pytest.mark.parametrize(
    ("name", "sets", "check"), ACCEPTED_BY_THE_CHART, ids=[c[0] for c in ACCEPTED_BY_THE_CHART]
)
def test_chart_renders_a_valid_config(
    helm: Helm, name: str, sets: tuple[str, ...], check: Callable[[Configuration], bool]
) -> None:
    res = template_set(helm, *sets)
    assert res.returncode == 0, res.stderr
    config = load_configuration(rendered_configuration(res.stdout), source=f"{name} ConfigMap")
    assert check(config), config
    lint = helm.run(
        "lint", "--strict", str(CHART), *[a for s in sets for a in ("--set", s)], check=False
    )
    assert lint.returncode == 0, lint.stdout
