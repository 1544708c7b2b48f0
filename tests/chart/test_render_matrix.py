"""The chart renders clean YAML with every combination of its options.

Every switch of values.yaml (booleans, enums, optional values) is listed in ``SWITCHES``; a test
checks that none is missing. The chart is rendered with the full product of the switches that
decide which objects exist (development mode, cert-manager, metrics, replicas and PDB) and with
an all-pairs covering of every switch, and each output is read with a YAML loader that refuses
duplicate mapping keys (kustomize and other strict readers refuse them; PyYAML's safe_load
silently keeps the last one).
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.config import load_configuration
from tests.chart.conftest import CHART, RELEASE, RELEASE_NAMESPACE, Helm, _bin_dir

Obj = dict[str, Any]

DEV_URL = "https://127.0.0.1:9443"
DEV_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
).decode()


# ---------------------------------------------------------------------------------------------
# A YAML loader that refuses duplicate keys
# ---------------------------------------------------------------------------------------------


class DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            if key in seen:
                raise DuplicateKeyError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    StrictLoader.construct_mapping,  # type: ignore[arg-type]
)


def strict_load_all(text: str) -> list[Obj]:
    return [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]


@pytest.mark.parametrize(
    ("name", "text", "refused"),
    [
        ("duplicate-label", "metadata:\n  labels:\n    a: x\n    a: y\n", True),
        ("duplicate-in-second-document", "a: 1\n---\nb: 1\nb: 2\n", True),
        ("same-key-in-two-mappings", "a:\n  k: 1\nb:\n  k: 1\n", False),
    ],
)
def test_strict_loader_refuses_duplicate_keys(name: str, text: str, refused: bool) -> None:
    if refused:
        with pytest.raises(DuplicateKeyError):
            strict_load_all(text)
        yaml.safe_load_all(text)  # what the lenient loader let through
    else:
        assert strict_load_all(text)


# ---------------------------------------------------------------------------------------------
# The switches
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    name: str
    values: dict[str, Any] = field(default_factory=dict)
    """Dotted value paths and what they are set to; empty for the chart's defaults."""


@dataclass(frozen=True)
class Switch:
    name: str
    options: tuple[Option, ...]


def _switch(name: str, *options: Option) -> Switch:
    return Switch(name, options)


DEFAULT = Option("default")

SWITCHES: tuple[Switch, ...] = (
    _switch(
        "dev-mode",
        DEFAULT,
        Option("on", {"webhook.devUrl": DEV_URL, "webhook.caBundle": DEV_CA}),
    ),
    _switch(
        "cert-manager",
        DEFAULT,
        Option("self-signed", {"certManager.enabled": True}),
        Option(
            "cluster-issuer",
            {
                "certManager.enabled": True,
                "certManager.issuerRef": {
                    "kind": "ClusterIssuer",
                    "name": "my-ca",
                    "group": "cert-manager.io",
                },
                "certManager.duration": "2160h",
                "certManager.renewBefore": "360h",
            },
        ),
    ),
    _switch(
        "metrics",
        DEFAULT,
        Option("no-service", {"metrics.service.enabled": False}),
        Option(
            "service-monitor",
            {
                "metrics.serviceMonitor.enabled": True,
                "metrics.serviceMonitor.labels": {"release": "prometheus"},
                "metrics.serviceMonitor.interval": "15s",
                "metrics.serviceMonitor.scrapeTimeout": "5s",
                "metrics.service.annotations": {"prometheus.io/scrape": "true"},
                "metrics.port": 9090,
            },
        ),
        Option(
            "service-monitor-without-service",
            {"metrics.serviceMonitor.enabled": True, "metrics.service.enabled": False},
        ),
        Option("plain-http", {"metrics.secure": False}),
        Option(
            "plain-http-service-monitor",
            {"metrics.secure": False, "metrics.serviceMonitor.enabled": True},
        ),
    ),
    _switch(
        "monitoring",
        DEFAULT,
        Option("alerts", {"metrics.prometheusRule.enabled": True}),
        Option(
            "dashboard",
            {
                "metrics.grafanaDashboard.enabled": True,
                "metrics.grafanaDashboard.namespace": "monitoring",
                "metrics.grafanaDashboard.annotations": {"grafana_folder": "kqueue"},
            },
        ),
        Option(
            "both",
            {
                "metrics.prometheusRule.enabled": True,
                "metrics.prometheusRule.labels": {"release": "prometheus"},
                "metrics.grafanaDashboard.enabled": True,
                "metrics.grafanaDashboard.sidecarLabel": "dashboards",
                "metrics.grafanaDashboard.sidecarLabelValue": "kqueue",
            },
        ),
    ),
    _switch(
        "web-view",
        DEFAULT,
        Option("on", {"webView.enabled": True}),
        Option("other-port", {"webView.enabled": True, "webView.port": 9000}),
    ),
    _switch(
        "visibility",
        DEFAULT,
        Option("off", {"visibility.enabled": False}),
        Option("other-port", {"visibility.port": 8443}),
    ),
    _switch(
        "replicas",
        DEFAULT,
        Option("three-with-pdb", {"replicaCount": 3, "podDisruptionBudget.minAvailable": 2}),
        Option("three-without-pdb", {"replicaCount": 3, "podDisruptionBudget.enabled": False}),
        Option("one-without-pdb", {"podDisruptionBudget.enabled": False}),
        Option(
            "three-with-affinity",
            {
                "replicaCount": 3,
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "pool", "operator": "In", "values": ["system"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
        ),
    ),
    _switch(
        "frameworks",
        DEFAULT,
        Option("jobs-only", {"config.integrations.frameworks": ["batch/job"]}),
        Option("pods-only", {"config.integrations.frameworks": ["pod"]}),
        Option("none", {"config.integrations.frameworks": []}),
    ),
    _switch("rbac", DEFAULT, Option("not-created", {"rbac.create": False})),
    _switch("aggregate-roles", DEFAULT, Option("off", {"rbac.aggregateToDefaultRoles": False})),
    _switch(
        "service-account",
        DEFAULT,
        Option("existing", {"serviceAccount.create": False, "serviceAccount.name": "mine"}),
        Option(
            "named-annotated",
            {
                "serviceAccount.name": "kqueue-sa",
                "serviceAccount.annotations": {"iam.example.com/role": "kqueue"},
            },
        ),
    ),
    _switch(
        "names",
        DEFAULT,
        Option("name-override", {"nameOverride": "batch-queue"}),
        Option("fullname-override", {"fullnameOverride": "queues"}),
    ),
    _switch(
        "image",
        DEFAULT,
        Option("tag-always", {"image.tag": "v9.9.9", "image.pullPolicy": "Always"}),
        Option(
            "digest-never",
            {
                "image.digest": "sha256:" + "a" * 64,
                "image.pullPolicy": "Never",
                "image.repository": "registry.example.com/kqueue",
                "imagePullSecrets": [{"name": "regcred"}],
            },
        ),
    ),
    _switch(
        "pod-settings",
        DEFAULT,
        Option(
            "all-set",
            {
                # podLabels repeats keys the chart sets: rendered once, selector labels kept.
                "podLabels": {"team": "batch", "app.kubernetes.io/part-of": "platform"},
                "podAnnotations": {"example.com/owner": "batch"},
                "priorityClassName": "system-cluster-critical",
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "kqueue"}},
                    }
                ],
                "env": [{"name": "TZ", "value": "UTC"}],
                "extraArgs": ["--zap-devel"],
            },
        ),
    ),
    _switch(
        "webhooks",
        DEFAULT,
        Option(
            "ignore-and-selected-namespaces",
            {
                "webhook.jobFailurePolicy": "Ignore",
                "webhook.kqueueFailurePolicy": "Ignore",
                "webhook.timeoutSeconds": 5,
                "webhook.port": 8443,
                "webhook.containerPort": 10250,
                "webhook.namespaceSelectorExpressions": [
                    {"key": "kqueue.io/managed", "operator": "In", "values": ["true"]}
                ],
            },
        ),
        Option(
            "config-namespace-selector",
            {
                "config.managedJobsNamespaceSelector": {"matchLabels": {"team": "batch"}},
                "webhook.namespaceSelectorExpressions": [{"key": "tier", "operator": "Exists"}],
            },
        ),
    ),
    _switch(
        "controller-config",
        DEFAULT,
        Option(
            "everything-on",
            {
                "config.waitForPodsReady.enable": True,
                "config.waitForPodsReady.timeout": "10m",
                "config.manageJobsWithoutQueueName": True,
                "config.metrics.enableClusterQueueResources": True,
                "config.leaderElection.leaderElect": False,
                "config.logging.format": "text",
                "config.logging.level": "debug",
                "health.port": 8082,
            },
        ),
        Option("warning-logs", {"config.logging.level": "warning"}),
        Option("error-logs", {"config.logging.level": "error"}),
    ),
)

# values.yaml leaves whose sub-keys are free-form Kubernetes objects, set as a whole (or not
# at all: their defaults are what the tests elsewhere check).
OPAQUE = {"podSecurityContext", "securityContext", "resources", "livenessProbe", "readinessProbe"}


def _leaves(values: Obj, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value and path not in OPAQUE:
            yield from _leaves(value, path)
        else:
            yield path, value


def _schema_at(schema: Obj, path: str) -> Obj:
    for part in path.split("."):
        schema = schema.get("properties", {}).get(part, {})
    return schema


def test_switches_cover_every_option_of_values_yaml() -> None:
    """Booleans both ways, every enum member, and every empty-by-default value set once."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    taken: dict[str, list[Any]] = {}
    for switch in SWITCHES:
        for option in switch.options:
            for path, value in option.values.items():
                taken.setdefault(path, []).append(value)
    problems = []
    for path, default in _leaves(values):
        seen = [default, *taken.get(path, [])]
        enum = _schema_at(schema, path).get("enum") or _schema_at(schema, path).get(
            "items", {}
        ).get("enum")
        if isinstance(default, bool) and {True, False} - set(seen):
            problems.append(f"{path}: only {seen}")
        elif enum and not isinstance(default, list) and set(enum) - set(seen):
            problems.append(f"{path}: never {sorted(set(enum) - set(seen))}")
        elif default in ("", [], {}) and len(seen) < 2:
            problems.append(f"{path}: never set")
    assert not problems, "add these to SWITCHES: " + "; ".join(problems)


# ---------------------------------------------------------------------------------------------
# Combinations
# ---------------------------------------------------------------------------------------------

# Which objects exist and how they refer to each other: rendered in every combination.
STRUCTURAL = ("dev-mode", "cert-manager", "metrics", "replicas")

Combination = tuple[Option, ...]


def all_pairs(switches: Sequence[Switch]) -> list[Combination]:
    """Rows covering every pair of options of two different switches (greedy, deterministic)."""
    sizes = [len(s.options) for s in switches]
    uncovered = {
        (i, a, j, b)
        for i, j in itertools.combinations(range(len(switches)), 2)
        for a in range(sizes[i])
        for b in range(sizes[j])
    }
    rows: list[list[int]] = []
    while uncovered:
        i, a, j, b = min(uncovered)
        row: dict[int, int] = {i: a, j: b}
        for k in range(len(switches)):
            if k in row:
                continue

            def gain(c: int, k: int = k, row: dict[int, int] = row) -> int:
                return sum(
                    (min(k, m), c if k < m else v, max(k, m), v if k < m else c) in uncovered
                    for m, v in row.items()
                )

            row[k] = max(range(sizes[k]), key=lambda c: (gain(c), -c))
        full = [row[k] for k in range(len(switches))]
        for p, q in itertools.combinations(range(len(switches)), 2):
            uncovered.discard((p, full[p], q, full[q]))
        rows.append(full)
    return [tuple(switches[k].options[c] for k, c in enumerate(r)) for r in rows]


def combinations() -> list[tuple[str, Combination]]:
    by_name = {s.name: s for s in SWITCHES}
    structural = [by_name[n] for n in STRUCTURAL]
    out: list[tuple[str, Combination]] = []
    for combo in itertools.product(*(s.options for s in structural)):
        out.append(
            ("/".join(f"{s.name}={o.name}" for s, o in zip(structural, combo, strict=True)), combo)
        )
    for row in all_pairs(SWITCHES):
        label = "/".join(
            f"{s.name}={o.name}" for s, o in zip(SWITCHES, row, strict=True) if o != DEFAULT
        )
        out.append((f"pairs:{label or 'defaults'}", row))
    return out


def test_all_pairs_covers_every_pair() -> None:
    rows = all_pairs(SWITCHES)
    for s, t in itertools.combinations(SWITCHES, 2):
        for a, b in itertools.product(s.options, t.options):
            assert any(a in row and b in row for row in rows), (s.name, a.name, t.name, b.name)
    # A covering is far smaller than the product (which would be thousands of renders).
    assert len(rows) < 40


def values_of(combo: Combination) -> Obj:
    values: Obj = {}
    for option in combo:
        for path, value in option.values.items():
            node = values
            *parents, leaf = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
    return values


# ---------------------------------------------------------------------------------------------
# Checks on one rendering
# ---------------------------------------------------------------------------------------------


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_rendering(text: str) -> list[Obj]:
    objs = strict_load_all(text)
    ids = [
        (o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in objs
    ]
    assert len(ids) == len(set(ids)), f"an object is rendered twice: {ids}"
    by_kind: dict[str, list[Obj]] = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
        for key, value in o["metadata"].get("labels", {}).items():
            assert isinstance(value, str), f"{o['kind']} label {key}: {value!r} is not a string"
    for cm in by_kind.get("ConfigMap", []):
        for key, doc in cm["data"].items():
            if key.endswith(".json"):  # the Grafana dashboard
                json.loads(doc)
                continue
            # The Configuration inside the ConfigMap is YAML too, read by the controller.
            [config] = strict_load_all(doc)
            load_configuration(yaml.safe_dump(config), source=f"ConfigMap {key}")
    pods = [d["spec"]["template"]["metadata"]["labels"] for d in by_kind.get("Deployment", [])]
    for d in by_kind.get("Deployment", []):
        assert _selects(d["spec"]["selector"]["matchLabels"], pods[0])
    for svc in by_kind.get("Service", []):
        assert any(_selects(svc["spec"]["selector"], p) for p in pods), svc["metadata"]["name"]
    for pdb in by_kind.get("PodDisruptionBudget", []):
        assert any(_selects(pdb["spec"]["selector"]["matchLabels"], p) for p in pods)
    for sm in by_kind.get("ServiceMonitor", []):
        selected = [
            s
            for s in by_kind.get("Service", [])
            if _selects(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert [s["metadata"]["name"] for s in selected] == [
            n for s in by_kind["Service"] if "metrics" in (n := s["metadata"]["name"])
        ], "the ServiceMonitor must select exactly the metrics Service"
        ports = {p["name"] for s in selected for p in s["spec"]["ports"]}
        assert {e["port"] for e in sm["spec"]["endpoints"]} <= ports
    return objs


def render(helm: Helm, values: Obj) -> subprocess.CompletedProcess[str]:
    return helm.template_raw(values, release=RELEASE, namespace=RELEASE_NAMESPACE)


def test_every_combination_renders_without_duplicate_keys(helm: Helm) -> None:
    cases = combinations()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: render(helm, values_of(c[1])), cases))
    failures = []
    kinds: set[str] = set()
    for (name, _), res in zip(cases, results, strict=True):
        if res.returncode != 0:
            failures.append(f"{name}: helm template failed: {res.stderr.strip()}")
            continue
        try:
            kinds |= {o["kind"] for o in check_rendering(res.stdout)}
        except (AssertionError, yaml.YAMLError, ValueError) as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, f"{len(failures)} of {len(cases)} combinations:\n" + "\n".join(failures)
    # The combinations reached every optional object of the chart.
    assert {
        "ServiceMonitor", "PodDisruptionBudget", "Certificate", "Issuer", "PrometheusRule"
    } <= kinds


def test_metrics_service_and_service_monitor_carry_the_metrics_component_once(
    helm: Helm,
) -> None:
    res = render(helm, {"metrics": {"serviceMonitor": {"enabled": True}}})
    assert res.returncode == 0, res.stderr
    objs = check_rendering(res.stdout)
    [svc] = [o for o in objs if o["metadata"]["name"] == "kqueue-metrics-service"]
    [sm] = [o for o in objs if o["kind"] == "ServiceMonitor"]
    assert svc["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"
    assert sm["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "kqueue",
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": "metrics",
    }
    # The Service still selects the controller pods.
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "controller"


@pytest.fixture(scope="module")
def kubectl_bin() -> Path:
    path = _bin_dir("kubernetes") / "kubectl"
    assert path.exists(), f"no kubectl at {path}"
    return path


# kubectl comes with the control plane build, which the `cluster` tests need anyway.
@pytest.mark.cluster
def test_kustomize_accepts_the_rendered_chart(helm: Helm, kubectl_bin: Path) -> None:
    """The report: `helm template | kubectl kustomize` failed on the metrics labels."""
    values = values_of(
        (
            Option("", {"metrics.serviceMonitor.enabled": True, "replicaCount": 2}),
            Option(
                "", {"certManager.enabled": True, "podLabels": {"app.kubernetes.io/part-of": "x"}}
            ),
        )
    )
    res = render(helm, values)
    assert res.returncode == 0, res.stderr
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kqueue.yaml").write_text(res.stdout)
        (Path(tmp) / "kustomization.yaml").write_text("resources:\n  - kqueue.yaml\n")
        out = subprocess.run(
            [str(kubectl_bin), "kustomize", tmp],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert out.returncode == 0, out.stderr
    kinds = {o["kind"] for o in strict_load_all(out.stdout)}
    assert {"ServiceMonitor", "Deployment", "Certificate"} <= kinds
