"""`helm lint` and `helm template` with several value sets, asserting on the rendered objects."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from kqueue import __version__
from kqueue.api.config import (
    DEFAULT_FRAMEWORKS,
    default_managed_namespace_selector,
    load_configuration,
    parse_bind_address,
)
from kqueue.controller.webhooks.config import webhook_configurations
from tests.chart.conftest import CHART, RELEASE_NAMESPACE, Helm, find, one

Obj = dict[str, Any]

DEV_URL = "https://127.0.0.1:9443"
DEV_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
).decode()
WEBHOOK_CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
WORKLOAD_WEBHOOK_RESOURCES = {"jobs", "pods"}


def webhooks(objs: list[Obj]) -> list[Obj]:
    return [
        wh for kind in WEBHOOK_CONFIG_KINDS for cfg in find(objs, kind) for wh in cfg["webhooks"]
    ]


def is_job_or_pod(wh: Obj) -> bool:
    return any(set(rule["resources"]) & WORKLOAD_WEBHOOK_RESOURCES for rule in wh["rules"])


def config_of(objs: list[Obj]) -> Obj:
    cm = one(objs, "ConfigMap", "kqueue-config")
    data: Obj = yaml.safe_load(cm["data"]["controller_config.yaml"])
    return data


def container(objs: list[Obj]) -> Obj:
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    c: Obj = pod["containers"][0]
    return c


@pytest.fixture(scope="module")
def default(helm: Helm) -> list[Obj]:
    return helm.template()


def test_helm_lint_passes_strict(helm: Helm) -> None:
    res = helm.run("lint", "--strict", str(CHART), check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    res = helm.run(
        "lint",
        "--strict",
        str(CHART),
        "--set",
        f"webhook.devUrl={DEV_URL}",
        "--set",
        f"webhook.caBundle={DEV_CA}",
        "--set",
        "replicaCount=3",
        "--set",
        "certManager.enabled=true",
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_default_render_has_the_controller_and_nothing_optional(default: list[Obj]) -> None:
    kinds = sorted({o["kind"] for o in default})
    assert kinds == sorted(
        {
            "ServiceAccount",
            "ConfigMap",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
            "Deployment",
            "APIService",
            *WEBHOOK_CONFIG_KINDS,
        }
    )
    cluster_scoped = ("ClusterRole", "ClusterRoleBinding", "APIService", *WEBHOOK_CONFIG_KINDS)
    for o in default:
        if o["metadata"]["name"] == "kqueue-auth-reader":
            # The one grant outside the release namespace: the API server's authentication
            # ConfigMap, for the visibility server.
            assert o["metadata"]["namespace"] == "kube-system", o["metadata"]
        elif o["kind"] not in cluster_scoped:
            assert o["metadata"]["namespace"] == RELEASE_NAMESPACE, o["metadata"]
    # CRDs come from crds/ (installed by helm before templates, never deleted), not templates.
    assert not find(default, "CustomResourceDefinition")


def test_image_defaults_to_the_app_version(helm: Helm, default: list[Obj]) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__, "keep Chart.yaml appVersion = kqueue.__version__"
    assert container(default)["image"] == f"ghcr.io/kqueue/kqueue:{__version__}"
    digest = "sha256:" + "a" * 64
    objs = helm.template({"image": {"digest": digest}})
    assert container(objs)["image"] == f"ghcr.io/kqueue/kqueue@{digest}"


def test_rendered_configuration_is_valid_and_agrees_with_the_other_objects(
    default: list[Obj],
) -> None:
    cfg = config_of(default)
    config = load_configuration(yaml.safe_dump(cfg), source="chart ConfigMap")
    assert config.namespace == RELEASE_NAMESPACE
    assert config.internal_cert_management.enable is True
    # The controller issues its certificate for the Service the API server calls.
    svc = one(default, "Service", config.internal_cert_management.webhook_service_name)
    c = container(default)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert svc["spec"]["ports"][0]["targetPort"] == "webhook-server"
    assert ports["webhook-server"] == config.webhook.port
    assert parse_bind_address(config.metrics.bind_address) == ("", ports["http-metrics"])
    assert parse_bind_address(config.health.bind_address) == ("", ports["health"])
    # The certificates are written under the writable /tmp emptyDir.
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert config.webhook.cert_dir.startswith("/tmp/")
    assert "/tmp" in mounts
    assert c["args"] == ["--config=/etc/kqueue/controller_config.yaml"]
    assert mounts["/etc/kqueue"]["readOnly"] is True
    # The default namespace selector excludes the release namespace and kube-system.
    assert not config.managed_jobs_namespace_selector.matches(
        {"kubernetes.io/metadata.name": RELEASE_NAMESPACE}
    )
    assert config.managed_jobs_namespace_selector.matches({"kubernetes.io/metadata.name": "team-a"})


def test_user_config_is_merged_but_release_fields_win(helm: Helm) -> None:
    objs = helm.template(
        {
            "config": {
                "waitForPodsReady": {"enable": True, "timeout": "10m"},
                "namespace": "elsewhere",
                "webhook": {"port": 1234},
            }
        },
        namespace="batch-system",
    )
    config = load_configuration(yaml.safe_dump(config_of(objs)))
    assert config.wait_for_pods_ready.enable is True
    assert str(config.wait_for_pods_ready.timeout) == "0:10:00"
    assert config.namespace == "batch-system"
    assert config.webhook.port == 9443


def test_pod_and_container_security_context(default: list[Obj]) -> None:
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(default)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["runAsNonRoot"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["tmp"]
    assert pod["serviceAccountName"] == one(default, "ServiceAccount")["metadata"]["name"]


def test_probes_and_resources(default: list[Obj]) -> None:
    c = container(default)
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["resources"]["requests"]["cpu"]
    assert c["resources"]["limits"]["memory"]


def _rules(objs: list[Obj], kind: str) -> list[Obj]:
    """The rules of the controller's own ClusterRole or Role (``kqueue-controller``)."""
    return [
        rule for role in find(objs, kind, "kqueue-controller") for rule in role.get("rules", [])
    ]


@pytest.mark.parametrize(
    "values",
    [{}, {"certManager": {"enabled": True}}, {"webhook": {"devUrl": DEV_URL, "caBundle": DEV_CA}}],
    ids=["default", "cert-manager", "dev"],
)
def test_rbac_names_every_verb_and_resource(helm: Helm, values: Obj) -> None:
    objs = helm.template(values)
    rules = _rules(objs, "ClusterRole") + _rules(objs, "Role")
    assert rules
    for rule in rules:
        assert rule.get("verbs"), rule
        for field in ("verbs", "resources", "apiGroups", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard in {field}: {rule}"
        assert "nonResourceURLs" not in rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
    cluster_resources = {r for rule in _rules(objs, "ClusterRole") for r in rule["resources"]}
    # Namespaced needs are granted in the release namespace only.
    assert "leases" not in cluster_resources
    assert "secrets" not in cluster_resources
    assert "configmaps" not in cluster_resources
    role = one(objs, "Role", "kqueue-controller")
    assert role["metadata"]["namespace"] == RELEASE_NAMESPACE
    binding = one(objs, "RoleBinding", "kqueue-controller")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = one(objs, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NAMESPACE}
    ]


def _grants(rules: list[Obj], group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in rules:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            verbs |= set(rule["verbs"])
    return verbs


def test_rbac_secrets_and_webhook_configurations_only_with_internal_certificates(
    helm: Helm, default: list[Obj]
) -> None:
    role = _rules(default, "Role")
    assert _grants(role, "coordination.k8s.io", "leases") == {"get", "create", "update"}
    assert _grants(role, "", "secrets") == {"get", "create", "update"}
    # update is limited to the one Secret; create cannot be (the name is not known yet). get
    # is also MultiKueue's, on the kubeconfig Secrets of MultiKueueClusters (any name, read only).
    for rule in role:
        if "secrets" in rule["resources"] and "update" in rule["verbs"]:
            assert rule["resourceNames"] == ["kqueue-webhook-server-cert"]
        elif "secrets" in rule["resources"] and "resourceNames" not in rule:
            assert rule["verbs"] in (["create"], ["get"])
    cluster = _rules(default, "ClusterRole")
    for rule in cluster:
        if "validatingwebhookconfigurations" in rule["resources"]:
            assert sorted(rule["resourceNames"]) == [
                "kqueue-mutating-webhook-configuration",
                "kqueue-validating-webhook-configuration",
            ]
    assert _grants(cluster, "admissionregistration.k8s.io", "mutatingwebhookconfigurations")
    # The pod integration evicts plain pods: DisruptionTarget on the status, then delete; and
    # MultiKueue reads a dispatched pod and writes its copy's status back (get, update).
    assert _grants(cluster, "", "pods") == {"list", "watch", "patch", "delete", "get"}
    assert _grants(cluster, "", "pods/status") == {"patch", "update"}
    assert _grants(cluster, "", "pods/finalizers") == {"update"}
    jobs_only = _rules(
        helm.template({"config": {"integrations": {"frameworks": ["batch/job"]}}}), "ClusterRole"
    )
    assert _grants(jobs_only, "", "pods") == {"list", "watch", "patch"}
    # Topology-aware scheduling marks pinned pods Failed, whatever the integrations.
    assert _grants(jobs_only, "", "pods/status") == {"patch"}
    assert not _grants(jobs_only, "", "pods/finalizers")
    for values in (
        {"certManager": {"enabled": True}},
        {"webhook": {"devUrl": DEV_URL, "caBundle": DEV_CA}},
    ):
        objs = helm.template(values)
        # Only MultiKueue's read of kubeconfig Secrets is left.
        assert _grants(_rules(objs, "Role"), "", "secrets") == {"get"}
        assert not _grants(
            _rules(objs, "ClusterRole"),
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
        )


def test_rbac_can_be_left_to_the_user(helm: Helm) -> None:
    objs = helm.template({"rbac": {"create": False}})
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        assert not find(objs, kind)


def _by_name(configs: list[Obj]) -> dict[str, Obj]:
    return {wh["name"]: wh for cfg in configs for wh in cfg["webhooks"]}


@pytest.mark.parametrize(
    "mode", ["service", "dev", "all-jobs", "jobs-only", "pods-only", "apps", "apps-all-jobs"]
)
def test_webhooks_are_the_controllers_own(helm: Helm, mode: str) -> None:
    """The chart renders exactly what kqueue's generator (used by `make run`) produces."""
    selector = default_managed_namespace_selector(RELEASE_NAMESPACE)
    apps = ["batch/job", "pod", "statefulset", "deployment"]
    frameworks = {
        "jobs-only": ["batch/job"],
        "pods-only": ["pod"],
        "apps": apps,
        "apps-all-jobs": apps,
    }.get(mode, list(DEFAULT_FRAMEWORKS))
    if mode == "dev":
        objs = helm.template({"webhook": {"devUrl": DEV_URL, "caBundle": DEV_CA}})
        expected = webhook_configurations(
            namespace_selector=selector, base_url=DEV_URL, ca_bundle=base64.b64decode(DEV_CA)
        )
    else:
        all_jobs = mode in ("all-jobs", "apps-all-jobs")
        objs = helm.template(
            {
                "config": {
                    "manageJobsWithoutQueueName": all_jobs,
                    "integrations": {"frameworks": frameworks},
                }
            }
        )
        expected = webhook_configurations(
            namespace_selector=selector,
            service={"name": "kqueue-webhook-service", "namespace": RELEASE_NAMESPACE, "port": 443},
            manage_jobs_without_queue_name=all_jobs,
            frameworks=frameworks,
        )
    names = {wh["name"] for cfg in expected for wh in cfg["webhooks"]}
    # The plain-pod webhook exactly when the pod integration runs.
    assert ("mplainpod.kqueue.io" in names) == ("pod" in frameworks)
    for want in expected:
        got = one(objs, want["kind"], want["metadata"]["name"])
        assert got["webhooks"] == want["webhooks"]


def test_webhooks_are_selective_and_fail_closed(default: list[Obj]) -> None:
    hooks = _by_name(find(default, "MutatingWebhookConfiguration"))
    hooks |= _by_name(find(default, "ValidatingWebhookConfiguration"))
    assert set(hooks) == {
        "mbatch-job.kqueue.io",
        "mplainpod.kqueue.io",
        "mpod.kqueue.io",
        "vbatch-job.kqueue.io",
        "vkqueue.kqueue.io",
        # the kinds of the integrations that are off: a queue label on them is reported
        "vintegrationoff.kqueue.io",
    }
    svc = one(default, "Service", "kqueue-webhook-service")
    excluded = {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", RELEASE_NAMESPACE],
    }
    for wh in hooks.values():
        assert wh["sideEffects"] == "None"
        assert wh["admissionReviewVersions"] == ["v1"]
        assert wh["timeoutSeconds"] == 10
        # Every webhook fails closed but the report of a queue label on a kind whose
        # integration is off, which never refuses anything.
        assert wh["failurePolicy"] == ("Ignore" if wh["name"] == "vintegrationoff.kqueue.io" else "Fail")
        ref = wh["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"]) == (svc["metadata"]["name"], RELEASE_NAMESPACE)
        assert ref["port"] == svc["spec"]["ports"][0]["port"]
        # The caBundle is injected by the controller at run time, not rendered.
        assert "caBundle" not in wh["clientConfig"]
        if is_job_or_pod(wh) or wh["name"] == "vintegrationoff.kqueue.io":
            # Never kube-system nor kqueue's namespace: no deadlock on kqueue being down.
            assert wh["namespaceSelector"] == {"matchExpressions": [excluded]}
        else:
            assert "namespaceSelector" not in wh and "objectSelector" not in wh
    # Only managed objects pay the latency.
    queue_label = {"matchExpressions": [{"key": "kqueue.io/queue-name", "operator": "Exists"}]}
    assert hooks["mbatch-job.kqueue.io"]["objectSelector"] == queue_label
    assert hooks["vbatch-job.kqueue.io"]["objectSelector"] == queue_label
    assert hooks["mpod.kqueue.io"]["objectSelector"] == {
        "matchLabels": {"kqueue.io/managed": "true"}
    }
    # Plain pods name a queue; a Job's pods (managed label from the Job webhook) never get here.
    assert hooks["mplainpod.kqueue.io"]["objectSelector"] == {
        "matchExpressions": [
            {"key": "kqueue.io/queue-name", "operator": "Exists"},
            {"key": "kqueue.io/managed", "operator": "DoesNotExist"},
        ]
    }
    assert hooks["mplainpod.kqueue.io"]["rules"][0]["operations"] == ["CREATE"]
    # Before mpod, so the managed label it adds routes the pod on to mpod's gate check.
    order = [wh["name"] for wh in one(default, "MutatingWebhookConfiguration")["webhooks"]]
    assert order.index("mplainpod.kqueue.io") < order.index("mpod.kqueue.io")


def test_webhook_values_change_policies_and_selectors(helm: Helm) -> None:
    objs = helm.template(
        {
            "webhook": {
                "jobFailurePolicy": "Ignore",
                "timeoutSeconds": 5,
                "namespaceSelectorExpressions": [
                    {"key": "kqueue.io/managed", "operator": "In", "values": ["true"]}
                ],
            },
            "config": {"manageJobsWithoutQueueName": True},
        }
    )
    for wh in webhooks(objs):
        if wh["name"] == "vintegrationoff.kqueue.io":
            assert wh["failurePolicy"] == "Ignore"  # whatever the values say: it only reports
        elif is_job_or_pod(wh):
            exprs = wh["namespaceSelector"]["matchExpressions"]
            assert {"key": "kqueue.io/managed", "operator": "In", "values": ["true"]} in exprs
            assert wh["failurePolicy"] == "Ignore"
            assert wh["timeoutSeconds"] == 5
        else:
            assert wh["failurePolicy"] == "Fail"
        if "jobs" in wh["rules"][0]["resources"]:
            # Every Job in a managed namespace is managed: the object selector matches all.
            assert wh["objectSelector"] == {}
    # The controller manages the same namespaces the webhooks see.
    config = load_configuration(yaml.safe_dump(config_of(objs)))
    selector = config.managed_jobs_namespace_selector
    assert selector.matches({"kubernetes.io/metadata.name": "team-a", "kqueue.io/managed": "true"})
    assert not selector.matches({"kubernetes.io/metadata.name": "team-a"})
    assert not selector.matches(
        {"kubernetes.io/metadata.name": "kube-system", "kqueue.io/managed": "true"}
    )


def test_a_managed_namespace_selector_in_config_drives_the_webhooks(helm: Helm) -> None:
    sel = {"matchLabels": {"team": "ml"}}
    objs = helm.template({"config": {"managedJobsNamespaceSelector": sel}})
    for wh in webhooks(objs):
        if is_job_or_pod(wh):
            assert wh["namespaceSelector"] == sel
    assert config_of(objs)["managedJobsNamespaceSelector"] == sel


def test_cert_manager_option(helm: Helm) -> None:
    objs = helm.template({"certManager": {"enabled": True}})
    cert = one(objs, "Certificate")
    issuer = one(objs, "Issuer")
    assert cert["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    assert "kqueue-webhook-service.kqueue-system.svc" in cert["spec"]["dnsNames"]
    for kind in WEBHOOK_CONFIG_KINDS:
        ann = one(objs, kind)["metadata"]["annotations"]
        assert (
            ann["cert-manager.io/inject-ca-from"]
            == f"{RELEASE_NAMESPACE}/{cert['metadata']['name']}"
        )
    config = load_configuration(yaml.safe_dump(config_of(objs)))
    assert config.internal_cert_management.enable is False
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    secret_volumes = [v for v in pod["volumes"] if "secret" in v]
    assert [v["secret"]["secretName"] for v in secret_volumes] == [cert["spec"]["secretName"]]
    mount = next(
        m for m in container(objs)["volumeMounts"] if m["name"] == secret_volumes[0]["name"]
    )
    assert mount["mountPath"] == config.webhook.cert_dir
    assert mount["readOnly"] is True
    # An existing issuer replaces the self-signed one.
    objs = helm.template(
        {
            "certManager": {
                "enabled": True,
                "issuerRef": {"kind": "ClusterIssuer", "name": "corp-ca"},
            }
        }
    )
    assert not find(objs, "Issuer")
    assert one(objs, "Certificate")["spec"]["issuerRef"] == {
        "kind": "ClusterIssuer",
        "name": "corp-ca",
    }


@pytest.mark.parametrize("replicas", [1, 3])
def test_replicas_pdb_and_anti_affinity(helm: Helm, replicas: int) -> None:
    objs = helm.template({"replicaCount": replicas})
    deploy = one(objs, "Deployment")
    assert deploy["spec"]["replicas"] == replicas
    pod = deploy["spec"]["template"]["spec"]
    if replicas == 1:
        assert not find(objs, "PodDisruptionBudget")
        assert "affinity" not in pod
        return
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == deploy["spec"]["selector"]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"] == deploy["spec"]["selector"]


def test_metrics_service_and_service_monitor(helm: Helm, default: list[Obj]) -> None:
    svc = one(default, "Service", "kqueue-metrics-service")
    assert svc["spec"]["ports"][0]["targetPort"] == "http-metrics"
    assert not find(default, "ServiceMonitor")
    objs = helm.template(
        {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}}
    )
    sm = one(objs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["endpoints"][0]["port"] == "http-metrics"
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    for key, value in sm["spec"]["selector"]["matchLabels"].items():
        assert svc["metadata"]["labels"][key] == value


def test_development_mode_points_webhooks_at_the_host_and_runs_nothing(helm: Helm) -> None:
    objs = helm.template(
        {
            "webhook": {"devUrl": DEV_URL + "/", "caBundle": DEV_CA},
            "replicaCount": 2,
            "certManager": {"enabled": True},
        }
    )
    for kind in ("Deployment", "Service", "PodDisruptionBudget", "Certificate", "Issuer"):
        assert not find(objs, kind), kind
    all_webhooks = webhooks(objs)
    assert all_webhooks
    for wh in all_webhooks:
        cc = wh["clientConfig"]
        assert "service" not in cc
        assert cc["caBundle"] == DEV_CA
        assert cc["url"].startswith(DEV_URL + "/mutate-") or cc["url"].startswith(
            DEV_URL + "/validate-"
        )
    for kind in WEBHOOK_CONFIG_KINDS:
        assert "annotations" not in one(objs, kind)["metadata"]
    # The configuration for the process on the host: it does not manage certificates.
    config = load_configuration(yaml.safe_dump(config_of(objs)))
    assert config.internal_cert_management.enable is False
    # The ServiceAccount and RBAC stay, so the host process can run with the chart's identity.
    assert find(objs, "ServiceAccount") and find(objs, "ClusterRole")


def test_development_mode_requires_a_ca_bundle(helm: Helm) -> None:
    res = helm.template_raw({"webhook": {"devUrl": DEV_URL}})
    assert res.returncode != 0
    assert "caBundle" in res.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCont": 2}, "replicaCont"),
        ({"webhook": {"jobFailurePolicy": "Sometimes"}}, "jobFailurePolicy"),
        ({"webhook": {"timeoutSeconds": 60}}, "timeoutSeconds"),
        ({"webhook": {"devUrl": "http://127.0.0.1:9443", "caBundle": DEV_CA}}, "devUrl"),
        ({"image": {"digest": "latest"}}, "digest"),
    ],
)
def test_values_schema_rejects_mistakes(helm: Helm, values: Obj, message: str) -> None:
    res = helm.template_raw(values)
    assert res.returncode != 0
    assert message in res.stderr, res.stderr


def test_release_name_changes_namespaced_names_consistently(helm: Helm) -> None:
    objs = helm.template(release="batch", namespace="batch-system")
    config = load_configuration(
        yaml.safe_dump(
            yaml.safe_load(
                one(objs, "ConfigMap", "batch-kqueue-config")["data"]["controller_config.yaml"]
            )
        )
    )
    assert config.internal_cert_management.webhook_service_name == "batch-kqueue-webhook-service"
    one(objs, "Service", "batch-kqueue-webhook-service")
    for wh in webhooks(objs):
        assert wh["clientConfig"]["service"]["name"] == "batch-kqueue-webhook-service"
        assert wh["clientConfig"]["service"]["namespace"] == "batch-system"


def test_visibility_api_objects_follow_the_option(helm: Helm, default: list[Obj]) -> None:
    apiservice = one(default, "APIService", "v1alpha1.visibility.kqueue.io")
    assert apiservice["spec"]["service"] == {
        "name": "kqueue-visibility",
        "namespace": RELEASE_NAMESPACE,
        "port": 443,
    }
    # kqueue's self-signed certificate, as Kueue's visibility server: nothing to verify with.
    assert apiservice["spec"]["insecureSkipTLSVerify"] is True
    svc = one(default, "Service", "kqueue-visibility")
    assert svc["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "visibility", "protocol": "TCP"}
    ]
    ports = {p["name"]: p["containerPort"] for p in container(default)["ports"]}
    assert ports["visibility"] == 8082
    assert config_of(default)["visibility"] == {"bindAddress": ":8082", "certDir": ""}
    reader = one(default, "Role", "kqueue-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["extension-apiserver-authentication"],
            "verbs": ["get"],
        }
    ]
    cq_viewer = one(default, "ClusterRole", "kqueue-pending-workloads-cq-viewer")
    assert cq_viewer["rules"][0]["resources"] == ["clusterqueues/pendingworkloads"]
    lq_viewer = one(default, "ClusterRole", "kqueue-pending-workloads-lq-viewer")
    assert lq_viewer["rules"][0]["resources"] == ["localqueues/pendingworkloads"]
    assert lq_viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    controller = _rules(default, "ClusterRole")
    assert _grants(controller, "authorization.k8s.io", "subjectaccessreviews") == {"create"}

    # cert-manager issues the certificate for the Service's name; its CA is injected.
    objs = helm.template({"certManager": {"enabled": True}})
    apiservice = one(objs, "APIService")
    assert "insecureSkipTLSVerify" not in apiservice["spec"]
    assert apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{RELEASE_NAMESPACE}/kqueue-serving-cert"
    )
    cert = one(objs, "Certificate")
    assert f"kqueue-visibility.{RELEASE_NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    assert config_of(objs)["visibility"]["certDir"] == config_of(objs)["webhook"]["certDir"]

    off = helm.template({"visibility": {"enabled": False}})
    assert not find(off, "APIService")
    assert not find(off, "Service", "kqueue-visibility")
    assert not find(off, "Role", "kqueue-auth-reader")
    assert config_of(off)["visibility"]["bindAddress"] == "0"
    assert "visibility" not in {p["name"] for p in container(off)["ports"]}
    # Development mode: the process on the host serves it; nothing to route to in the cluster.
    dev = helm.template({"webhook": {"devUrl": DEV_URL, "caBundle": DEV_CA}})
    assert not find(dev, "APIService") and find(dev, "Role", "kqueue-auth-reader")


def test_secure_metrics_by_default_plain_http_on_request(helm: Helm, default: list[Obj]) -> None:
    assert config_of(default)["metrics"]["secure"] is True
    reader = one(default, "ClusterRole", "kqueue-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert _grants(_rules(default, "ClusterRole"), "authentication.k8s.io", "tokenreviews") == {
        "create"
    }
    sm = one(helm.template({"metrics": {"serviceMonitor": {"enabled": True}}}), "ServiceMonitor")
    endpoint = sm["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}

    plain = helm.template({"metrics": {"secure": False, "serviceMonitor": {"enabled": True}}})
    assert config_of(plain)["metrics"]["secure"] is False
    assert not find(plain, "ClusterRole", "kqueue-metrics-reader")
    endpoint = one(plain, "ServiceMonitor")["spec"]["endpoints"][0]
    assert "scheme" not in endpoint and "bearerTokenFile" not in endpoint
    # The visibility API still reviews callers; with both off, no review is granted.
    assert _grants(_rules(plain, "ClusterRole"), "authentication.k8s.io", "tokenreviews")
    neither = helm.template({"metrics": {"secure": False}, "visibility": {"enabled": False}})
    assert not _grants(_rules(neither, "ClusterRole"), "authentication.k8s.io", "tokenreviews")
    assert not _grants(
        _rules(neither, "ClusterRole"), "authorization.k8s.io", "subjectaccessreviews"
    )
