"""The operators kqueue integrates with, built from their Go modules and run on demand.

Each operator is one Go module version (through the Go module proxy, like the control plane in
``build.py``): one binary is built with a generated wrapper module, and the CRDs and webhook
manifests come from the same module version's files in the Go module cache. Nothing is built or
started until a test or ``make run`` asks for the operator (``LocalCluster.start_operator``).

Every operator talks to the local API server as a cluster admin and listens on 127.0.0.1 only:
its health probe on a free port, metrics off. Webhooks are either served on loopback (the
module's own webhook manifests, with ``clientConfig.service`` replaced by
``url: https://127.0.0.1:PORT/<path>`` and the local CA, as kqueue's own webhooks are served in
the local cluster) or switched off where the operator has a switch for it.
"""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import yaml

from kqueue.api.integrations.registry import DEFAULT_FRAMEWORKS, FRAMEWORK_NEEDS, INTEGRATIONS
from kqueue.localcluster import build, spark_dist

JOBSET_VERSION = os.environ.get("KQUEUE_JOBSET_VERSION", "v0.12.0")
TRAINER_VERSION = os.environ.get("KQUEUE_TRAINER_VERSION", "v2.3.0")
# v0.8.2 is the newest mpi-operator the module proxy here serves (v0.8.3 and v0.9.0 answer 403).
MPI_OPERATOR_VERSION = os.environ.get("KQUEUE_MPI_OPERATOR_VERSION", "v0.8.2")
KUBERAY_VERSION = os.environ.get("KQUEUE_KUBERAY_VERSION", "v1.5.1")
LWS_VERSION = os.environ.get("KQUEUE_LWS_VERSION", "v0.7.0")
TRAINING_OPERATOR_VERSION = os.environ.get("KQUEUE_TRAINING_OPERATOR_VERSION", "v1.9.2")
# The training-operator v1 kinds kqueue integrates; its MPIJob v1 is left to mpi-operator
# (kubeflow.org/v2beta1), whose CRD has the same name and would be replaced by v1's.
TRAINING_OPERATOR_SCHEMES = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")
# v2.5.2 (Kueue's): v2.3.0's SparkApplication has no spec.suspend, which holds a queued one.
SPARK_OPERATOR_VERSION = os.environ.get("KQUEUE_SPARK_OPERATOR_VERSION", "v2.5.2")
APPWRAPPER_VERSION = os.environ.get("KQUEUE_APPWRAPPER_VERSION", "v1.1.2")
# The namespace the AppWrapper operator reads its configuration ConfigMap from (NAMESPACE).
APPWRAPPER_NAMESPACE = "kube-system"
APPWRAPPER_CONFIG = "appwrapper-operator-config"


class OperatorError(RuntimeError):
    """An operator could not be built, configured or started; the message says which and why."""


@dataclass(frozen=True)
class WebhookManifest:
    """A file of webhook configurations in the module and the JSON patches kustomize applies."""

    path: str
    # JSON 6902 patch files (op add/replace/remove), each applied to the configuration whose
    # kind is the key ("MutatingWebhookConfiguration" / "ValidatingWebhookConfiguration").
    patches: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunContext:
    """What an operator's command line is built from."""

    binary: Path
    work_dir: Path
    kubeconfig: Path
    health_port: int
    webhook_port: int
    # controller-runtime's webhook server reads tls.crt / tls.key from here
    cert_dir: Path


@dataclass(frozen=True)
class Operator:
    name: str
    component: build.Component
    # CRD files, relative to the module's root in the module cache
    crds: tuple[str, ...]
    # None: the operator serves no webhooks here (it has none, or they are switched off)
    webhooks: WebhookManifest | None
    # (argv after the binary, extra environment)
    command: Callable[[RunContext], tuple[list[str], dict[str, str]]]
    # "readyz": GET http://127.0.0.1:<health_port>/readyz answers 200;
    # "lease": the operator holds its leader-election Lease (see lease)
    readiness: str = "readyz"
    lease: tuple[str, str] | None = None
    # operators that must run first (Trainer creates JobSets)
    requires: tuple[str, ...] = ()
    # ports the operator binds on every interface whatever its flags say; checked free first
    fixed_ports: tuple[int, ...] = ()
    # objects its deployment manifests create and it expects to find (applied before start)
    objects: tuple[dict[str, Any], ...] = ()
    # directories its code reads a serving certificate from whatever its flags say; filled
    # from the local CA when empty
    fixed_cert_dirs: tuple[str, ...] = ()
    # Left out of `make test` (their tests run under `make test-operators`): the cold CI budget
    # pays for the control plane, JobSet and Trainer only (docs/local-cluster.md, "CI budget").
    opt_in: bool = False
    # objects made from the run's ports and directories (its configuration), applied before start
    run_objects: Callable[[RunContext], tuple[dict[str, Any], ...]] | None = None
    # its webhook server starts (and its readiness waits on it) even with no webhook registered:
    # it gets a serving certificate in cert_dir all the same
    serving_cert: bool = False
    # What its start needs besides the binary, built with it (at the end of test collection,
    # outside the tests' timeouts): (whether it is there, build it; raises BuildError). The
    # Spark operator's spark-submit.
    assets: tuple[Callable[[], bool], Callable[[], object]] | None = None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.component.module}@{self.component.version})"


def _yaml_file(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _jobset_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    config = _yaml_file(
        ctx.work_dir / "config.yaml",
        {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {
                "host": "127.0.0.1",
                "port": ctx.webhook_port,
                "certDir": str(ctx.cert_dir),
            },
            "leaderElection": {"leaderElect": False},
            # The local CA signs the serving certificate; the operator's own rotator would
            # want a Service and a Secret in its namespace.
            "internalCertManagement": {"enable": False},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ctx.health_port}"},
        },
    )
    return [
        f"--kubeconfig={ctx.kubeconfig}",
        f"--config={config}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{ctx.health_port}",
        "--leader-elect=false",
        "--zap-devel=false",
    ], {}


def _trainer_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    config = _yaml_file(
        ctx.work_dir / "config.yaml",
        {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ctx.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": ctx.webhook_port, "host": "127.0.0.1"},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
        },
    )
    # Trainer has no certDir setting: controller-runtime's default is
    # $TMPDIR/k8s-webhook-server/serving-certs, so TMPDIR points at the operator's directory.
    return [f"--kubeconfig={ctx.kubeconfig}", f"--config={config}"], {
        "TMPDIR": str(ctx.cert_dir.parent.parent)
    }


def _mpi_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    # mpi-operator always runs leader election and always serves /healthz on :8080 (a variable
    # in its server.go, not a flag); metrics are off with --monitoring-port=0. It has no webhooks.
    return [
        f"--kubeConfig={ctx.kubeconfig}",
        "--lock-namespace=kube-system",
        "--monitoring-port=0",
        "--kube-api-qps=50",
        "--kube-api-burst=100",
        "--alsologtostderr",
    ], {"KUBECONFIG": str(ctx.kubeconfig)}


def _kuberay_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    # Webhooks are only served with ENABLE_WEBHOOKS=true; left off.
    return [
        f"--kubeconfig={ctx.kubeconfig}",
        "--metrics-addr=0",
        f"--health-probe-bind-address=127.0.0.1:{ctx.health_port}",
        "--enable-leader-election=false",
        "--log-stdout-encoder=console",
    ], {"ENABLE_WEBHOOKS": "false"}


def _lws_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    config = _yaml_file(
        ctx.work_dir / "config.yaml",
        {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {
                "host": "127.0.0.1",
                "port": ctx.webhook_port,
                "certDir": str(ctx.cert_dir),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ctx.health_port}"},
        },
    )
    return [
        f"--kubeconfig={ctx.kubeconfig}",
        f"--config={config}",
        "--zap-devel=false",
    ], {}


def _training_operator_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    # Its webhook server always runs, with certificates from its own rotator (a Secret in
    # MY_POD_NAMESPACE, for the name <service>.<namespace>.svc, which the loopback URL the API
    # server would call does not match, mounted by a Deployment at a fixed path): its
    # ValidatingWebhookConfiguration is not installed, so its webhooks (validation only; it
    # has no defaulting webhook) are off here.
    return [
        f"--kubeconfig={ctx.kubeconfig}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{ctx.health_port}",
        f"--webhook-server-port={ctx.webhook_port}",
        "--leader-elect=false",
        "--zap-devel=false",
        *(f"--enable-scheme={s}" for s in TRAINING_OPERATOR_SCHEMES),
    ], {"MY_POD_NAMESPACE": "kube-system"}


def _appwrapper_config(ctx: RunContext) -> tuple[dict[str, Any], ...]:
    # The operator reads its whole configuration from a ConfigMap (creating one with its
    # defaults, webhooks on, when absent). Its webhooks are switched off there: they would need
    # its own certificate rotator (a Secret and a Service in its namespace); with them off it
    # neither defaults podSets nor suspends, which kqueue's webhook does for a queued
    # AppWrapper.
    config = {
        "webhooksEnabled": False,
        "controllerManager": {
            "metrics": {"bindAddress": "0"},
            "health": {"bindAddress": f"127.0.0.1:{ctx.health_port}"},
            "leaderElection": False,
        },
    }
    return (
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": APPWRAPPER_CONFIG, "namespace": APPWRAPPER_NAMESPACE},
            "data": {"config.yaml": yaml.safe_dump(config, sort_keys=False)},
        },
    )


def _appwrapper_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    return [f"--config={APPWRAPPER_CONFIG}", "--zap-devel=false"], {
        "NAMESPACE": APPWRAPPER_NAMESPACE,
        "TMPDIR": str(ctx.cert_dir.parent.parent),
    }


def _spark_operator_command(ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    # Its webhook (a pod defaulter) is a separate `webhook start` command: not run, so off.
    # It submits through $SPARK_HOME/bin/spark-submit: a distribution assembled from Maven
    # Central (spark_dist, built with the binary: `assets`; a SparkDistError, a BuildError,
    # fails the build or the start, saying which step). The master URL
    # it gives spark-submit is read from the in-cluster variables: the local API server. Its
    # KUBECONFIG (read by the operator and by spark-submit's client) has the client key in SEC1
    # form, the one form of an EC key that client reads.
    spark_home = spark_dist.ensure()
    server = urlsplit(yaml.safe_load(ctx.kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    env = {
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port or 443),
        "SPARK_HOME": str(spark_home),
        "PATH": f"{spark_home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(spark_dist.sec1_kubeconfig(ctx.kubeconfig, ctx.work_dir)),
    }
    return [
        "controller",
        "start",
        f"--health-probe-bind-address=127.0.0.1:{ctx.health_port}",
        "--metrics-bind-address=0",
        "--leader-election=false",
        "--enable-ui-service=false",
    ], env


def _jobset_requires() -> tuple[str, ...]:
    if (JOBSET_VERSION, TRAINER_VERSION) == ("v0.12.0", "v2.3.0"):
        return (f"github.com/kubeflow/trainer/v2 {TRAINER_VERSION}",)
    return ()


def _component(name: str, module: str, version: str, package: str, binary: str) -> build.Component:
    return build.Component(name=name, module=module, version=version, binaries=((package, binary),))


OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in (
        Operator(
            name="jobset",
            component=build.Component(
                name="jobset",
                module="sigs.k8s.io/jobset",
                version=JOBSET_VERSION,
                binaries=(("sigs.k8s.io/jobset", "jobset-controller"),),
                ldflags=lambda: [f"-X sigs.k8s.io/jobset/pkg/version.GitVersion={JOBSET_VERSION}"],
                # Trainer v2.3.0 requires JobSet v0.12.0 and is always run with it: building JobSet
                # with Trainer's build list (k8s.io v0.36.2 instead of v0.36.0, controller-runtime
                # v0.24.1 instead of v0.24.0: patch releases) lets the two builds share most of
                # their compiled packages. Only while the versions are that pair.
                requires=_jobset_requires(),
            ),
            crds=("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
            # JobSet has no switch to turn its webhooks off: served on 127.0.0.1
            webhooks=WebhookManifest(
                "config/components/webhook/manifests.yaml",
                {
                    "MutatingWebhookConfiguration": (
                        "config/components/webhook/patches/mutating-patch.yaml"
                    ),
                    "ValidatingWebhookConfiguration": (
                        "config/components/webhook/patches/validating-patch.yaml"
                    ),
                },
            ),
            command=_jobset_command,
        ),
        Operator(
            name="trainer",
            component=_component(
                "trainer",
                "github.com/kubeflow/trainer/v2",
                TRAINER_VERSION,
                "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
                "trainer-controller-manager",
            ),
            crds=(
                "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
                "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
                "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
            ),
            # no switch either: served on 127.0.0.1
            webhooks=WebhookManifest(
                "manifests/base/webhook/manifests.yaml",
                {
                    "MutatingWebhookConfiguration": "manifests/base/webhook/patch_mutating.yaml",
                    "ValidatingWebhookConfiguration": (
                        "manifests/base/webhook/patch_validating.yaml"
                    ),
                },
            ),
            command=_trainer_command,
            requires=("jobset",),
        ),
        Operator(
            name="mpi-operator",
            component=build.Component(
                name="mpi-operator",
                module="github.com/kubeflow/mpi-operator",
                version=MPI_OPERATOR_VERSION,
                binaries=(("github.com/kubeflow/mpi-operator/cmd/mpi-operator", "mpi-operator"),),
                ldflags=lambda: [
                    f"-X github.com/kubeflow/mpi-operator/pkg/version.Version={MPI_OPERATOR_VERSION}"
                ],
            ),
            crds=("manifests/base/kubeflow.org_mpijobs.yaml",),
            # mpi-operator has no webhooks
            webhooks=None,
            command=_mpi_command,
            readiness="lease",
            lease=("kube-system", "mpi-operator"),
            fixed_ports=(8080,),
            opt_in=True,
        ),
        Operator(
            name="kuberay",
            component=_component(
                "kuberay",
                "github.com/ray-project/kuberay/ray-operator",
                KUBERAY_VERSION,
                "github.com/ray-project/kuberay/ray-operator",
                "kuberay-operator",
            ),
            crds=(
                "config/crd/bases/ray.io_rayclusters.yaml",
                "config/crd/bases/ray.io_rayjobs.yaml",
                "config/crd/bases/ray.io_rayservices.yaml",
            ),
            # KubeRay serves its RayCluster webhook only with ENABLE_WEBHOOKS=true: off
            webhooks=None,
            command=_kuberay_command,
            opt_in=True,
        ),
        Operator(
            name="lws",
            component=_component(
                "lws", "sigs.k8s.io/lws", LWS_VERSION, "sigs.k8s.io/lws/cmd", "lws-controller"
            ),
            crds=("config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
            # ENABLE_WEBHOOKS=false would turn them off, but the pod webhook writes the
            # labels the LeaderWorkerSet controller relies on: served on 127.0.0.1
            webhooks=WebhookManifest(
                "config/webhook/manifests.yaml",
                {
                    "MutatingWebhookConfiguration": "config/webhook/mutating-patch.yaml",
                    "ValidatingWebhookConfiguration": "config/webhook/validating-patch.yaml",
                },
            ),
            command=_lws_command,
            opt_in=True,
        ),
        Operator(
            name="training-operator",
            component=_component(
                "training-operator",
                "github.com/kubeflow/training-operator",
                TRAINING_OPERATOR_VERSION,
                "github.com/kubeflow/training-operator/cmd/training-operator.v1",
                "training-operator",
            ),
            crds=tuple(
                f"manifests/base/crds/kubeflow.org_{s}s.yaml" for s in TRAINING_OPERATOR_SCHEMES
            ),
            webhooks=None,
            command=_training_operator_command,
            # its certificate rotator waits for tls.crt in this directory (where a Deployment
            # mounts its Secret); its webhook server reads it there too (TMPDIR unset)
            fixed_cert_dirs=("/tmp/k8s-webhook-server/serving-certs",),
            # its manifests create this Secret empty; its rotator fills it and exits if absent
            objects=(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "training-operator-webhook-cert", "namespace": "kube-system"},
                },
            ),
            opt_in=True,
        ),
        Operator(
            name="spark-operator",
            component=_component(
                "spark-operator",
                "github.com/kubeflow/spark-operator/v2",
                SPARK_OPERATOR_VERSION,
                "github.com/kubeflow/spark-operator/v2/cmd/operator",
                "spark-operator",
            ),
            # the controller watches all of its kinds
            crds=tuple(
                f"config/crd/bases/sparkoperator.k8s.io_{plural}.yaml"
                for plural in ("sparkapplications", "scheduledsparkapplications", "sparkconnects")
            ),
            webhooks=None,
            command=_spark_operator_command,
            opt_in=True,
            assets=(spark_dist.stamp_ok, spark_dist.ensure),
        ),
        Operator(
            name="appwrapper",
            component=build.Component(
                name="appwrapper",
                module="github.com/project-codeflare/appwrapper",
                version=APPWRAPPER_VERSION,
                binaries=(("github.com/project-codeflare/appwrapper/cmd", "appwrapper-controller"),),
                ldflags=lambda: [f"-X main.BuildVersion={APPWRAPPER_VERSION}"],
            ),
            crds=("config/crd/bases/workload.codeflare.dev_appwrappers.yaml",),
            # switched off in its configuration ConfigMap (run_objects)
            webhooks=None,
            command=_appwrapper_command,
            run_objects=_appwrapper_config,
            # controller-runtime's webhook server still listens (on :9443, not configurable in
            # v1.1.2) and its /readyz waits for it; it needs a certificate to start
            serving_cert=True,
            fixed_ports=(9443,),
            opt_in=True,
        ),
    )
}


def default_names() -> list[str]:
    """The operators `make test` builds and runs (with what they require first)."""
    return with_requirements([name for name, op in OPERATORS.items() if not op.opt_in])


def get(name: str) -> Operator:
    try:
        return OPERATORS[name]
    except KeyError:
        raise OperatorError(
            f"unknown operator {name!r}; known: {', '.join(sorted(OPERATORS))}"
        ) from None


def parse_names(text: str) -> list[str]:
    """``"jobset,trainer"`` -> the operators, each validated (``make run OPERATORS=...``)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        get(name)
    return names


def with_requirements(names: list[str]) -> list[str]:
    """The operators ``names`` start: each after the ones it requires (Trainer runs JobSet)."""
    out: list[str] = []
    for name in names:
        for dep in (*get(name).requires, name):
            if dep not in out:
                out.append(dep)
    return out


def integrations_for(names: list[str]) -> list[str]:
    """The frameworks to enable when ``names`` run (``make run OPERATORS=...``): the built-in
    defaults, every integration whose operator starts, and what those need; in the registry's
    order."""
    started = set(with_requirements(names))
    wanted = set(DEFAULT_FRAMEWORKS) | {i.framework for i in INTEGRATIONS if i.operator in started}
    wanted |= {need for name in list(wanted) for need in FRAMEWORK_NEEDS.get(name, ())}
    return [i.framework for i in INTEGRATIONS if i.framework in wanted]


def built(op: Operator) -> Path | None:
    """The operator's binary if it and its assets are already built (no build, no lock)."""
    out_dir = build.cache_dir() / "bin" / op.component.dir_name
    if not build.stamp_ok(op.component, out_dir):
        return None
    if op.assets is not None and not op.assets[0]():
        return None
    return out_dir / op.component.binaries[0][1]


def ensure_built(op: Operator, *, force: bool = False, nice: int = 0) -> Path:
    """Build the operator's binary and assets if needed (each under its own lock) and return
    the binary's path."""
    out_dir = build.ensure_component(op.component, force=force, nice=nice)
    if op.assets is not None:
        op.assets[1]()
    return out_dir / op.component.binaries[0][1]


def module_dir(op: Operator) -> Path:
    """The operator module's files in the Go module cache (downloaded if needed)."""
    root = build.cache_dir()
    info = build.module_info(
        op.component,
        root / "gomod" / op.component.dir_name,
        root / "logs" / f"download-{op.component.dir_name}.log",
    )
    return Path(info["Dir"])


def _load_documents(path: Path) -> list[dict[str, Any]]:
    # CRDs run to megabytes (KubeRay's RayCluster: 0.9 MB); libyaml parses them 10x faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = list(yaml.load_all(path.read_text(), Loader=loader))
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc}") from exc
    return [d for d in docs if isinstance(d, dict)]


def module_documents(name: str, rel: str) -> list[dict[str, Any]]:
    """The YAML documents of a file in an operator's module (samples, runtimes)."""
    return _load_documents(module_dir(get(name)) / rel)


def crd_list_paths(crds: list[dict[str, Any]]) -> list[str]:
    """The API path listing each CRD's objects (all namespaces), for every served version."""
    paths = []
    for crd in crds:
        spec = crd["spec"]
        for version in spec.get("versions") or []:
            if version.get("served", True):
                paths.append(f"/apis/{spec['group']}/{version['name']}/{spec['names']['plural']}")
    return paths


class ApiClient(Protocol):
    """What the CRD and webhook helpers need of LocalCluster."""

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float = 10.0
    ) -> tuple[int, Any]: ...

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]: ...


def _poll(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise OperatorError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def install_crds(api: ApiClient, op: Operator, root: Path) -> None:
    """Apply the operator's CRDs and wait until every version of each is served."""
    install_crd_files(api, op.crds, root)


def install_crd_files(api: ApiClient, crd_files: tuple[str, ...], root: Path) -> None:
    """Apply CRD files of a module (relative to ``root``) and wait until every version of each
    is served."""
    # The module's files as they are: parsing and dumping megabytes of CRDs (KubeRay's
    # RayCluster alone is 0.9 MB) would cost more than the API server takes to store them.
    files = [f"--filename={root / rel}" for rel in crd_files]
    res = api.kubectl("apply", "--server-side", "--force-conflicts", "-o", "name", *files)
    names = [
        line.split("/", 1)[1]
        for line in res.stdout.split()
        if line.startswith("customresourcedefinition.")
    ]
    if len(names) < len(crd_files):
        raise OperatorError(
            f"{', '.join(crd_files)} in {root} hold {len(names)} CustomResourceDefinitions, "
            f"expected at least {len(crd_files)}: {res.stdout.strip()}"
        )
    # Polled here rather than with `kubectl wait`, which errors out on a CRD whose status has
    # no conditions yet (right after the apply).
    crds: list[dict[str, Any]] = []
    for name in names:
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"

        def established(path: str = path) -> bool:
            status, body = api.request("GET", path)
            if status != 200:
                return False
            conds = (body.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                crds.append(body)
                return True
            return False

        _poll(f"CRD {name} Established", established, 60.0)
    # Established can come a moment before the resource is served; an operator that lists its
    # kind once at start-up (mpi-operator exits on a 404) must not see that gap.
    for list_path in crd_list_paths(crds):

        def served(list_path: str = list_path) -> bool:
            return api.request("GET", f"{list_path}?limit=1")[0] == 200

        _poll(f"{list_path} served", served, 30.0)


def delete_webhooks(api: ApiClient, op: Operator) -> None:
    """Remove the webhook configurations registered for the operator (named ``<op>-...``)."""
    if op.webhooks is None:
        return
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        status, body = api.request("GET", f"/apis/admissionregistration.k8s.io/v1/{kind}")
        for item in (body or {}).get("items", []) if status == 200 else []:
            name = item["metadata"]["name"]
            if name.startswith(f"{op.name}-"):
                api.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}")


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise OperatorError(f"JSON pointer {path!r} does not start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The add/replace/remove subset of RFC 6902 that the modules' kustomize patches use."""
    out = copy.deepcopy(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
        parent: Any = out
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[index]
            else:
                raise OperatorError(f"unsupported JSON patch op {kind!r} at {op.get('path')}")
        elif kind in ("add", "replace"):
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del parent[last]
        else:
            raise OperatorError(f"unsupported JSON patch op {kind!r} at {op.get('path')}")
    return out


def webhook_documents(
    op: Operator, root: Path, *, base_url: str, ca_bundle_b64: str
) -> list[dict[str, Any]]:
    """The module's webhook configurations, patched as its kustomization does, pointed at us.

    ``clientConfig.service`` (an in-cluster Service) becomes ``url: <base_url><path>`` with
    the local CA; configurations are renamed ``<operator>-<name>`` so two operators' generic
    kubebuilder names cannot collide.
    """
    if op.webhooks is None:
        return []
    out = []
    for doc in _load_documents(root / op.webhooks.path):
        kind = doc.get("kind")
        patch_file = op.webhooks.patches.get(str(kind))
        if patch_file:
            ops = yaml.safe_load((root / patch_file).read_text()) or []
            doc = apply_json_patch(doc, ops)
        doc["metadata"] = {"name": f"{op.name}-{doc['metadata']['name']}"}
        for hook in doc.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service") or {}
            path = service.get("path", "/")
            hook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": ca_bundle_b64}
        out.append(doc)
    return out


def check_fixed_ports(op: Operator) -> None:
    """Fail early, naming the port, when a port the operator cannot be moved off is taken."""
    for port in op.fixed_ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))
            except OSError as exc:
                raise OperatorError(
                    f"{op.label} always listens on :{port} (not configurable in this version) "
                    f"and that port is taken here: {exc}"
                ) from None


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m kqueue.localcluster.operators",
        description="Build (or reuse) operator binaries from their Go modules.",
    )
    parser.add_argument("names", nargs="+", choices=sorted(OPERATORS), metavar="NAME")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    ns = parser.parse_args(argv)
    for name in ns.names:
        try:
            path = ensure_built(get(name), force=ns.force)
        except build.BuildError as exc:
            build.log(f"FAILED: {exc}")
            return 1
        print(path, file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
