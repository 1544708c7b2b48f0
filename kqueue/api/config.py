"""The controller's configuration file: ``apiVersion: config.kqueue.io/v1alpha1, kind: Configuration``.

Field names and defaults follow Kueue's ``config.kueue.x-k8s.io`` Configuration where kqueue has
the same feature. Durations are Kubernetes (Go) duration strings such as ``"5m"`` or ``"1m30s"``
and are held as exact :class:`datetime.timedelta` values, never as floats.

This module parses text and does no I/O: the CLI reads the file and hands its text to
:func:`load_configuration`.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from fractions import Fraction
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kqueue.api import feature_gates
from kqueue.api.durations import FORMS as DURATION_FORMS
from kqueue.api.durations import DurationError, format_duration, parse_duration

# The framework names come from the integrations' declarations (one per kind; those needing an
# operator are off by default, so kqueue never waits on an API a cluster lacks).
from kqueue.api.integrations.registry import DEFAULT_FRAMEWORKS as DEFAULT_FRAMEWORKS
from kqueue.api.integrations.registry import FRAMEWORK_NEEDS as FRAMEWORK_NEEDS
from kqueue.api.integrations.registry import SUPPORTED_FRAMEWORKS as SUPPORTED_FRAMEWORKS
from kqueue.api.quantity import QuantityError, parse_exact
from kqueue.api.v1alpha1.base import (
    DNS1123_SUBDOMAIN_PATTERN,
    QUALIFIED_NAME_ALLOWED,
    is_qualified_name,
)

API_VERSION: Final = "config.kqueue.io/v1alpha1"
KIND: Final = "Configuration"

DEFAULT_NAMESPACE: Final = "kqueue-system"

# ---------------------------------------------------------------------------------------------
# Durations
# ---------------------------------------------------------------------------------------------

# One parser and one formatter, Go's (kqueue/api/durations.py).


def _duration_input(value: object) -> object:
    # Only strings (and timedeltas built in Python) are durations: a bare number is ambiguous
    # (seconds? nanoseconds, as Go would read it?), so it is rejected instead of guessed.
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        return parse_duration(value)
    raise DurationError(f"{value!r} is not {DURATION_FORMS}")


Duration = Annotated[
    timedelta,
    BeforeValidator(_duration_input),
    PlainSerializer(format_duration, return_type=str),
]

# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


class _Model(BaseModel):
    # Unknown fields are errors: a misspelt key would otherwise silently fall back to a default.
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        # YAML already types its scalars; "50" for an integer or "yes" for a boolean is a
        # mistake to report, not to coerce.
        strict=True,
    )


_LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_BIND_ADDRESS: Final = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[^:\[\]]*):(?P<port>\d{1,5})$")


def parse_bind_address(value: str) -> tuple[str, int] | None:
    """Split ``"host:port"`` (``":8080"`` = all interfaces) into its parts; ``"0"`` = disabled."""
    if value == "0":
        return None
    m = _BIND_ADDRESS.match(value)
    if m is None or not 0 <= int(m.group("port")) <= 65535:
        raise ValueError(f'{value!r} is not "host:port", ":port" or "0" (disabled)')
    host = m.group("host")
    if host.startswith("["):
        host = host[1:-1]
    return host, int(m.group("port"))


def _check_bind_address(value: str) -> str:
    parse_bind_address(value)
    return value


BindAddress = Annotated[str, AfterValidator(_check_bind_address)]


class Health(_Model):
    bind_address: BindAddress = ":8081"
    """Address of the health probe server (``/healthz``, ``/readyz``): ``host:port``, ``:port``
    for all interfaces, or ``"0"`` to disable it."""


class Metrics(_Model):
    bind_address: BindAddress = ":8080"
    """Address of the Prometheus metrics server (``/metrics``): ``host:port``, ``:port`` for all
    interfaces, or ``"0"`` to disable it."""
    enable_cluster_queue_resources: bool = False
    """Also export per-ClusterQueue quota, reservation and usage gauges
    (``kqueue_cluster_queue_nominal_quota`` and friends), one series per flavor and resource."""
    secure: bool = True
    """Serve ``/metrics`` over HTTPS to callers with a bearer token, authenticated with a
    TokenReview and authorized with a SubjectAccessReview (``get`` on the non-resource URL
    ``/metrics``), as controller-runtime's metrics filters do. ``false`` serves plain,
    unauthenticated HTTP."""
    cert_dir: str = ""
    """Directory holding ``tls.crt`` and ``tls.key`` for the secure metrics server (reloaded at
    start); empty for a self-signed certificate made at start (scrapers then skip
    verification, as with controller-runtime's default)."""


class Visibility(_Model):
    bind_address: BindAddress = "0"
    """Address of the ``visibility.kqueue.io`` API server (HTTPS, behind the kube-apiserver's
    aggregation layer): ``host:port``, ``:port`` for all interfaces, or ``"0"`` (the default)
    for none. The Helm chart serves it on ``:8082``."""
    cert_dir: str = ""
    """Directory holding ``tls.crt`` and ``tls.key`` for the visibility server; empty for a
    self-signed certificate made at start (the APIService then sets
    ``insecureSkipTLSVerify``, as Kueue's does)."""


class PredictedStart(_Model):
    """Predicted start times of pending workloads (``estimatedStartTime``): the engine's state
    run forward off the admission path, in a thread of its own (kqueue/engine/forecast)."""

    enable: bool = True
    """Compute predictions; false: no ``estimatedStartTime`` anywhere."""
    interval: Duration = timedelta(seconds=30)
    """Predictions are recomputed at most this often, and sooner after a large change (a
    workload holding quota finished or was evicted, or many workloads came or went)."""
    budget: Duration = timedelta(seconds=2)
    """Time one recomputation may take; one cut short keeps the predictions it made."""
    history_half_life: Duration = timedelta(hours=24)
    """Half-life of a finished workload's run time in its LocalQueue's history (decayed p50
    and p90)."""

    @field_validator("interval", "budget", "history_half_life")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError(f"must be positive, got {format_duration(value)}")
        return value


class WebView(_Model):
    bind_address: BindAddress = "0"
    """Address of the read-only web view (plain HTTP: the cohort tree with usage, pending
    workloads with positions and reasons, a workload's explanation): ``host:port``, ``:port``
    for all interfaces, or ``"0"`` (the default) for none. It shows every namespace's
    workloads to whoever reaches it: keep it behind ``kubectl port-forward`` or an
    authenticating proxy."""


class Webhook(_Model):
    host: str = ""
    """Interface the admission webhook server listens on; empty for all interfaces."""
    port: int = Field(default=9443, ge=1, le=65535)
    """TLS port of the admission webhook server."""
    cert_dir: str = "/tmp/k8s-webhook-server/serving-certs"
    """Directory holding ``tls.crt`` and ``tls.key`` (and ``ca.crt``); the server reloads them
    when they change."""


class LeaderElection(_Model):
    leader_elect: bool = True
    """Run leader election so that only one replica admits workloads at a time."""
    resource_name: str = Field(default="kqueue-leader", min_length=1)
    """Name of the ``coordination.k8s.io/v1`` Lease used for the election."""
    resource_namespace: str | None = None
    """Namespace of the Lease; defaults to ``namespace``."""
    lease_duration: Duration = timedelta(seconds=15)
    """How long a standby waits, after last seeing the lease renewed, before taking it over.
    Whole seconds (the Lease stores an integer)."""
    renew_deadline: Duration = timedelta(seconds=10)
    """How long the leader keeps retrying to renew before it gives up leadership; shorter than
    ``leaseDuration`` so the old leader stops before anyone else can start."""
    retry_period: Duration = timedelta(seconds=2)
    """Interval between attempts to acquire or renew the lease."""

    @model_validator(mode="after")
    def _check_timings(self) -> LeaderElection:
        if self.lease_duration < timedelta(seconds=1) or self.lease_duration.microseconds:
            raise ValueError(
                f"leaseDuration: must be a whole number of seconds >= 1s, "
                f"got {format_duration(self.lease_duration)}"
            )
        if self.retry_period <= timedelta(0):
            raise ValueError("retryPeriod: must be positive")
        if self.renew_deadline >= self.lease_duration:
            raise ValueError(
                f"renewDeadline: must be shorter than leaseDuration "
                f"({format_duration(self.renew_deadline)} >= "
                f"{format_duration(self.lease_duration)})"
            )
        # client-go's rule: retries are jittered by up to 20%, and the leader must get at least
        # one retry in before its deadline passes.
        if self.renew_deadline * 5 <= self.retry_period * 6:
            raise ValueError(
                f"renewDeadline: must be longer than 1.2 x retryPeriod "
                f"({format_duration(self.renew_deadline)} vs "
                f"{format_duration(self.retry_period)})"
            )
        return self


class ClientConnection(_Model):
    qps: int = 300
    """Sustained requests per second to the API server, per resource type (Workloads,
    ClusterQueues, Events, Pods... each get their own, as in Kueue's controller-runtime
    clients); 0 or negative disables client-side throttling. Kueue v0.19's default."""
    burst: int = 500
    """Requests allowed above ``qps`` in a burst, per resource type. Kueue v0.19's default."""

    @model_validator(mode="after")
    def _check_burst(self) -> ClientConnection:
        if self.qps > 0 and self.burst < 1:
            raise ValueError(f"burst: must be >= 1 when qps > 0, got {self.burst}")
        return self


class RequeuingStrategy(_Model):
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    """Which time orders a requeued workload in its queue: ``Eviction`` (the time of its last
    eviction) or ``Creation`` (its creation time)."""
    backoff_base_seconds: int = Field(default=60, ge=1)
    """Base of the exponential requeue backoff: the n-th requeue waits about
    ``backoffBaseSeconds * 2^(n-1)`` seconds."""
    backoff_max_seconds: int = Field(default=3600, ge=1)
    """Upper bound of the requeue backoff, in seconds."""
    backoff_limit_count: int | None = Field(default=None, ge=0)
    """How many times a workload is requeued after a PodsReady timeout before it is
    deactivated; null for no limit."""

    @model_validator(mode="after")
    def _check_backoff(self) -> RequeuingStrategy:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError(
                f"backoffMaxSeconds: must be >= backoffBaseSeconds "
                f"({self.backoff_max_seconds} < {self.backoff_base_seconds})"
            )
        return self


class WaitForPodsReady(_Model):
    enable: bool = False
    """Evict and requeue an admitted workload whose pods are not all ready within ``timeout``."""
    timeout: Duration = timedelta(minutes=5)
    """How long an admitted workload may take for all its pods to become ready."""
    block_admission: bool | None = None
    """Admit no other workload while an admitted one is not yet ready; when unset it follows
    ``enable`` (as in Kueue)."""
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()
    """How workloads evicted for a PodsReady timeout are requeued."""
    recovery_timeout: Duration | None = None
    """How long a running workload whose pods stopped being ready may take to recover before it
    is evicted; null to never evict for that."""

    @field_validator("timeout", "recovery_timeout")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"must be positive, got {format_duration(value)}")
        return value

    @property
    def blocks_admission(self) -> bool:
        """``blockAdmission`` with its default resolved."""
        return self.enable if self.block_admission is None else self.block_admission


PreemptionStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
# Kueue accepts exactly these lists (pkg/config/validation.go): the second strategy is a fallback
# the preemption uses only when the first cannot make room.
PREEMPTION_STRATEGY_SETS: tuple[tuple[str, ...], ...] = (
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
)


DEFAULT_PREEMPTION_STRATEGIES: tuple[PreemptionStrategy, ...] = (
    "LessThanOrEqualToFinalShare",
    "LessThanInitialShare",
)


class FairSharing(_Model):
    preemption_strategies: list[PreemptionStrategy] = Field(
        default_factory=lambda: list(DEFAULT_PREEMPTION_STRATEGIES)
    )
    """Which constraint a fair-sharing preemption must satisfy; the second is tried only when
    the preemptor does not fit with the first. ``LessThanOrEqualToFinalShare``: the preemptor's
    share with the incoming workload is at most the victim ClusterQueue's share without the
    victim. ``LessThanInitialShare``: the preemptor's share with the incoming workload is below
    the victim ClusterQueue's share before the preemption. Allowed lists:
    ``[LessThanOrEqualToFinalShare]``, ``[LessThanInitialShare]``,
    ``[LessThanOrEqualToFinalShare, LessThanInitialShare]`` (the default)."""

    @field_validator("preemption_strategies")
    @classmethod
    def _supported_set(cls, value: list[str]) -> list[str]:
        if tuple(value) not in PREEMPTION_STRATEGY_SETS:
            allowed = "; ".join(f"[{', '.join(s)}]" for s in PREEMPTION_STRATEGY_SETS)
            raise ValueError(f"unsupported list [{', '.join(value)}]: allowed lists are {allowed}")
        return value


def _weight_input(value: object) -> str:
    # A resource weight is a non-negative decimal number. YAML gives 1.5 as a float: its
    # shortest decimal text (repr) is the number the user wrote, so it is read from that text
    # and never computed with in binary floating point.
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number (a decimal such as 1, 0.5 or \"2.5\")")
    if isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"{value!r} is not a number (a decimal such as 1, 0.5 or \"2.5\")")
    if not _WEIGHT.match(text):
        raise ValueError(f"{value!r} is not a number (a decimal such as 1, 0.5 or \"2.5\")")
    if Fraction(text) < 0:
        raise ValueError(f"must be greater than or equal to 0, got {text}")
    return text


_WEIGHT: Final = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
# A resource weight: exact decimal text (see _weight_input); Fraction(text) is its value.
ResourceWeight = Annotated[str, BeforeValidator(_weight_input)]


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError(f"must be greater than or equal to 0, got {format_duration(value)}")
    return value


class AdmissionFairSharing(_Model):
    usage_half_life_time: Duration = timedelta(0)
    """After this time a LocalQueue's recorded usage has decayed by half. 0: usage is not
    remembered (every LocalQueue counts as unused; the entry penalty is 0 too), as in Kueue."""
    usage_sampling_interval: Duration = timedelta(minutes=5)
    """How often the decayed usage of every LocalQueue is updated (and written to its status
    ``fairSharing.admissionFairSharingStatus``); it is also updated on every admission. The
    entry penalty of an admission is its requests times ``1 - 0.5^(interval/halfLife)``."""
    resource_weights: dict[str, ResourceWeight] = Field(default_factory=dict)
    """Weight of each resource when a LocalQueue's usage is summed over resources (default 1
    for a resource not listed; 0 ignores it). Non-negative decimal numbers."""

    @field_validator("usage_half_life_time")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        return _not_negative(value)

    @field_validator("usage_sampling_interval")
    @classmethod
    def _positive_interval(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError(f"must be greater than 0, got {format_duration(value)}")
        return value


class MinAdmitDuration(_Model):
    """Preemption protection on one preemption path."""

    min_admit_duration: Duration
    """How long a workload stays admitted (from its current ``Admitted`` condition) before it
    may be preempted on this path. ``0s``: no protection."""

    @field_validator("min_admit_duration")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        return _not_negative(value)


class PreemptionProtection(_Model):
    """A minimum admitted time before a workload may be preempted, per preemption path (Kueue's
    KEP-9876 names, plus ``withinClusterQueue``). A ClusterQueue's
    ``spec.preemption.protection`` overrides it, path by path, for that ClusterQueue's
    workloads as victims. A protected workload is not a preemption candidate on that path; the
    preemptor waits and is retried when the first protection ends."""

    within_cluster_queue: MinAdmitDuration | None = None
    """Guards preemption within the victim's ClusterQueue (``InClusterQueue``)."""
    reclaim_within_cohort: MinAdmitDuration | None = None
    """Guards reclaiming quota from other ClusterQueues of the cohort
    (``InCohortReclamation`` and ``InCohortReclaimWhileBorrowing``)."""
    fair_sharing: MinAdmitDuration | None = None
    """Guards fair-sharing preemption (``InCohortFairSharing``)."""


class Integrations(_Model):
    frameworks: list[str] = Field(default_factory=lambda: list(DEFAULT_FRAMEWORKS))
    """Kinds kqueue manages, by framework name: ``batch/job`` (Jobs), ``pod`` (plain pods and
    pod groups), or any other integration docs/integrations.md lists with the operator and the
    frameworks it needs (the ones it needs must be listed too)."""

    @field_validator("frameworks")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for i, name in enumerate(value):
            if name not in SUPPORTED_FRAMEWORKS:
                raise ValueError(
                    f"[{i}]: unknown framework {name!r}; supported: "
                    + ", ".join(SUPPORTED_FRAMEWORKS)
                )
            if name in seen:
                raise ValueError(f"[{i}]: {name!r} is listed twice")
            seen.add(name)
        for i, name in enumerate(value):
            missing = [n for n in FRAMEWORK_NEEDS.get(name, ()) if n not in seen]
            if missing:
                raise ValueError(
                    f"[{i}]: {name!r} needs " + ", ".join(repr(n) for n in missing)
                    + " (its pods are handled by the pod integration): add it to the list"
                )
        return value


class LabelSelectorRequirement(_Model):
    key: str = Field(min_length=1)
    """The label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the label's value relates to ``values``."""
    values: list[str] = Field(default_factory=list)
    """Values for ``In``/``NotIn``; must be empty for ``Exists``/``DoesNotExist``."""

    @model_validator(mode="after")
    def _check_values(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"values: must be non-empty for operator {self.operator}")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"values: must be empty for operator {self.operator}")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


class LabelSelector(_Model):
    match_labels: dict[str, str] = Field(default_factory=dict)
    """Labels that must all be present with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)
    """Requirements that must all hold."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy the selector (an empty selector matches everything)."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


def default_managed_namespace_selector(namespace: str) -> LabelSelector:
    """Kueue's default: every namespace except ``kube-system`` and the controller's own."""
    return LabelSelector(
        match_expressions=[
            LabelSelectorRequirement(
                key="kubernetes.io/metadata.name",
                operator="NotIn",
                values=["kube-system", namespace],
            )
        ]
    )


class InternalCertManagement(_Model):
    enable: bool = True
    """Generate and rotate the webhook's serving certificate and inject its CA into the webhook
    configurations. Disable it to provide certificates yourself (for example with cert-manager)."""
    webhook_service_name: str = "kqueue-webhook-service"
    """Service fronting the webhook server; the certificate is issued for its DNS names."""
    webhook_secret_name: str = "kqueue-webhook-server-cert"
    """Secret in ``namespace`` that stores the generated CA and serving certificate."""


class Logging(_Model):
    format: Literal["text", "json"] = "text"
    """``text`` for people, ``json`` (one object per line) for log collectors."""
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level that is logged."""


_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(DNS1123_SUBDOMAIN_PATTERN)


class DeviceSelector(_Model):
    """A DRA device selector (``resource.k8s.io/v1`` ``DeviceSelector``)."""

    class Cel(_Model):
        expression: str
        """A CEL expression over ``device`` (kqueue reads the subset in docs/dra.md)."""

    cel: Cel


class DeviceClassCounterSource(_Model):
    """A partitionable device's counter as quota (Kueue's ``DeviceClassCounterSource``)."""

    name: str
    """The counter name in the devices' ``consumesCounters`` (a DNS label), across all
    counter sets of the driver."""
    driver: str
    """The DRA driver whose ResourceSlices publish the devices (a DNS subdomain, at most 63
    characters)."""
    device_selector: DeviceSelector
    """Which of the driver's devices share this quota (a CEL expression)."""

    @model_validator(mode="after")
    def _check(self) -> DeviceClassCounterSource:
        if not _DNS_LABEL.match(self.name):
            raise ValueError(f"name: {self.name!r} is not a DNS label (RFC 1123)")
        if len(self.driver) > 63 or not _DNS_SUBDOMAIN.match(self.driver):
            raise ValueError(
                f"driver: {self.driver!r} is not a DNS subdomain of at most 63 characters"
            )
        if not self.device_selector.cel.expression:
            raise ValueError("deviceSelector.cel.expression: required")
        return self


class DeviceClassSource(_Model):
    """One accounting source of a mapping (Kueue's ``DeviceClassSourceConfig``); kqueue reads
    ``counter`` (KueueDRAIntegrationPartitionableDevices)."""

    counter: DeviceClassCounterSource


class DeviceClassMapping(_Model):
    """One quota resource standing for DRA devices (Kueue's ``DeviceClassMapping``)."""

    name: str
    """The quota resource name ClusterQueues give quota for (``nvidia.com/gpu``); each device a
    pod's ResourceClaimTemplates request from one of ``deviceClassNames`` counts as 1, or, with
    counter ``sources``, as its counters."""
    device_class_names: list[str]
    """The DeviceClasses (``resource.k8s.io/v1``) counted as ``name``: 1 to 8 qualified names."""
    sources: list[DeviceClassSource] = Field(default_factory=list)
    """Partitionable devices (Kueue's KueueDRAIntegrationPartitionableDevices): a request for
    one of ``deviceClassNames`` counts as the largest value of the counter ``counter.name``
    among the driver's published devices it and the ``deviceSelector`` match, times its count
    (a MIG partition counts its memory). See docs/dra.md."""

    def counter_name(self) -> str:
        """Kueue's counterNameForMapping: the first source's counter name, or ''."""
        return self.sources[0].counter.name if self.sources else ""

    @model_validator(mode="after")
    def _check_names(self) -> DeviceClassMapping:
        if not is_qualified_name(self.name):
            raise ValueError(
                f"name: {self.name!r} is not a qualified name ({QUALIFIED_NAME_ALLOWED})"
            )
        if not 1 <= len(self.device_class_names) <= MAX_DEVICE_CLASSES_PER_MAPPING:
            raise ValueError(
                f"deviceClassNames: {len(self.device_class_names)} given; allowed: 1 to "
                f"{MAX_DEVICE_CLASSES_PER_MAPPING} DeviceClass names"
            )
        for i, dc in enumerate(self.device_class_names):
            if not is_qualified_name(dc):
                raise ValueError(
                    f"deviceClassNames[{i}]: {dc!r} is not a qualified name "
                    f"({QUALIFIED_NAME_ALLOWED})"
                )
            if dc in self.device_class_names[:i]:
                raise ValueError(f"deviceClassNames[{i}]: {dc!r} is given twice")
        return self


# Kueue's limits (pkg/config/validation.go, validateDeviceClassMappings).
MAX_DEVICE_CLASS_MAPPINGS: Final = 16
MAX_DEVICE_CLASSES_PER_MAPPING: Final = 8


class ResourceTransformation(_Model):
    """How one resource a pod requests is counted against quota (Kueue's
    ``resources.transformations[]``)."""

    input: str
    """The resource a pod requests (e.g. ``nvidia.com/mig-1g.5gb``)."""
    strategy: Literal["Retain", "Replace"] = "Retain"
    """``Retain``: the input still counts as itself besides the outputs; ``Replace``: only the
    outputs count (with no outputs, the input is not counted at all)."""
    multiply_by: str | None = None
    """Another resource the pod requests whose amount multiplies the input's before the outputs
    are computed (e.g. per-GPU memory times the GPUs); the retained input is not multiplied."""
    outputs: dict[str, str] = Field(default_factory=dict)
    """Per unit of the input, the quantity of each output resource counted (``{example.com/
    credits: "10"}``); a negative factor takes from what other transformations give that
    output (never below zero)."""

    @field_validator("outputs", mode="before")
    @classmethod
    def _numbers_as_quantities(cls, value: Any) -> Any:
        # YAML reads `credits: 10` as a number; a quantity is its string.
        if isinstance(value, dict):
            return {
                k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _check(self) -> ResourceTransformation:
        for name in (self.input, *([self.multiply_by] if self.multiply_by else []),
                     *self.outputs):
            if not is_qualified_name(name):
                raise ValueError(
                    f"{name!r} is not a resource name ({QUALIFIED_NAME_ALLOWED})"
                )
        for name, value in self.outputs.items():
            try:
                parse_exact(value)
            except (QuantityError, ValueError) as err:
                raise ValueError(f"outputs[{name}]: {value!r} is not a quantity: {err}") from None
        return self


class Resources(_Model):
    """How resources are counted against quota (Kueue's ``resources``)."""

    exclude_resource_prefixes: list[str] = Field(default_factory=list)
    """Resources whose name starts with one of these prefixes are not counted against quota
    (Kueue's ``excludeResourcePrefixes``); placement on nodes still counts them."""
    transformations: list[ResourceTransformation] = Field(default_factory=list)
    """Resources a pod requests counted as others against quota (Kueue's
    ``transformations``), e.g. a MIG slice as accelerator memory and credits: each entry has
    ``input``, ``strategy`` (``Retain``, the default, or ``Replace``), ``multiplyBy`` and
    ``outputs``, one entry per input. Placement on nodes (topology-aware scheduling) counts what
    the pods request. See docs/dra.md."""

    device_class_mappings: list[DeviceClassMapping] = Field(default_factory=list)
    """DRA devices as quota (Kueue's KueueDRAIntegration): each maps DeviceClasses to a quota
    resource name, ``[{name: nvidia.com/gpu, deviceClassNames: [gpu.nvidia.com]}]``. A pod's
    ResourceClaimTemplates then count their device requests (``exactly.count``) as that many
    units of the mapped resource per pod; a request for a DeviceClass mapped nowhere makes the
    workload ``Misconfigured``. See docs/dra.md."""

    @model_validator(mode="after")
    def _check_transformations(self) -> Resources:
        seen: set[str] = set()
        for i, tr in enumerate(self.transformations):
            if tr.input in seen:
                raise ValueError(f"transformations[{i}].input: {tr.input!r} is given twice")
            seen.add(tr.input)
        return self

    @model_validator(mode="after")
    def _check_mappings(self) -> Resources:
        mappings = self.device_class_mappings
        if len(mappings) > MAX_DEVICE_CLASS_MAPPINGS:
            raise ValueError(
                f"deviceClassMappings: {len(mappings)} given; allowed: at most "
                f"{MAX_DEVICE_CLASS_MAPPINGS}"
            )
        names: set[str] = set()
        owner: dict[str, str] = {}
        counters: dict[str, set[str]] = {}
        for i, m in enumerate(mappings):
            if m.name in names:
                raise ValueError(f"deviceClassMappings[{i}].name: {m.name!r} is given twice")
            names.add(m.name)
            counter = m.counter_name()
            for j, dc in enumerate(m.device_class_names):
                where = f"deviceClassMappings[{i}].deviceClassNames[{j}]: device class {dc!r}"
                if dc not in owner:
                    owner[dc] = m.name
                    counters[dc] = {counter} - {""}
                # As Kueue: a DeviceClass in two mappings only when each tracks its own counter
                # (gpu.memory and gpu.compute of one partitionable device).
                elif not counter or not counters[dc]:
                    raise ValueError(f"{where} already mapped to resource {owner[dc]}")
                elif counter in counters[dc]:
                    raise ValueError(
                        f"{where} already has a counter source for counter {counter!r}"
                    )
                else:
                    counters[dc].add(counter)
        return self

    def device_classes(self) -> dict[str, str]:
        """Each mapped DeviceClass's quota resource name."""
        out: dict[str, str] = {}
        for m in self.device_class_mappings:
            for dc in m.device_class_names:
                out.setdefault(dc, m.name)  # Kueue's mapper: the first mapping names it
        return out


class IncrementalDispatcherConfig(_Model):
    """The Incremental dispatcher of MultiKueue (Kueue's ``incrementalDispatcherConfig``)."""

    step_size: int = Field(default=3, ge=1)
    """Worker clusters nominated per round, in the MultiKueueConfig's order (Kueue's
    ``stepSize``, default 3)."""
    round_timeout: Duration = timedelta(minutes=5)
    """How long a round waits for a nominated worker to admit the workload before the next
    ``stepSize`` clusters are nominated too (Kueue's fixed 5 minutes; kqueue's extension)."""

    @field_validator("round_timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError(f"must be positive, got {format_duration(value)}")
        return value


DISPATCHER_ALL_AT_ONCE: Final = "kqueue.io/multikueue-dispatcher-all-at-once"
DISPATCHER_INCREMENTAL: Final = "kqueue.io/multikueue-dispatcher-incremental"


class MultiKueue(_Model):
    """MultiKueue: dispatching workloads to worker clusters (docs/multikueue.md)."""

    gc_interval: Duration = timedelta(minutes=1)
    """Time between two runs of the garbage collector, which deletes the objects this manager
    created on workers (label ``kqueue.io/multikueue-origin``) whose Workload is gone here.
    ``0s`` switches it off."""
    origin: str = Field(default="multikueue", min_length=1, max_length=63)
    """Value of the ``kqueue.io/multikueue-origin`` label on the objects this manager creates
    on workers: give each manager that shares a worker its own."""
    worker_lost_timeout: Duration = timedelta(minutes=15)
    """How long a workload admitted on a worker that can no longer be reached keeps its place;
    then it is evicted here and dispatched again (its copy on the lost worker is garbage
    collected when the worker comes back)."""
    dispatcher_name: str = DISPATCHER_ALL_AT_ONCE
    """Who nominates the workers a workload is copied to:
    ``kqueue.io/multikueue-dispatcher-all-at-once`` (every active worker of the config),
    ``kqueue.io/multikueue-dispatcher-incremental`` (``incrementalDispatcherConfig.stepSize``
    more per round, in the config's order) or any other name: an external controller writes
    the Workload's ``status.nominatedClusterNames``."""
    incremental_dispatcher_config: IncrementalDispatcherConfig = IncrementalDispatcherConfig()
    """The Incremental dispatcher's step size and round timeout."""

    @field_validator("origin")
    @classmethod
    def _label_value(cls, value: str) -> str:
        if not _LABEL_VALUE.match(value):
            raise ValueError(
                f"{value!r} is not a valid label value (letters, digits, '-', '_' and '.', at "
                "most 63 characters, starting and ending with a letter or digit)"
            )
        return value

    @field_validator("gc_interval", "worker_lost_timeout")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError(f"must not be negative, got {format_duration(value)}")
        return value


class Configuration(_Model):
    """Configuration of the kqueue controller manager."""

    api_version: Literal["config.kqueue.io/v1alpha1"] = API_VERSION
    """Always ``config.kqueue.io/v1alpha1``."""
    kind: Literal["Configuration"] = KIND
    """Always ``Configuration``."""
    namespace: str = DEFAULT_NAMESPACE
    """Namespace the controller runs in; holds its Lease and webhook Secret."""
    health: Health = Health()
    """Health probe server."""
    metrics: Metrics = Metrics()
    """Prometheus metrics server."""
    webhook: Webhook = Webhook()
    """Admission webhook server."""
    visibility: Visibility = Visibility()
    """The pending-workloads API (``visibility.kqueue.io/v1alpha1``)."""
    web_view: WebView = WebView()
    """The read-only web view (``kqueue dashboard`` served by the controller)."""
    predicted_start: PredictedStart = PredictedStart()
    """Predicted start times on pending workloads (visibility API, ``kubectl kqueue``)."""
    leader_election: LeaderElection = LeaderElection()
    """Leader election between replicas."""
    client_connection: ClientConnection = ClientConnection()
    """Client-side throttling of requests to the API server."""
    wait_for_pods_ready: WaitForPodsReady = WaitForPodsReady()
    """All-or-nothing readiness of admitted workloads' pods (Kueue's waitForPodsReady)."""
    integrations: Integrations = Integrations()
    """Which job kinds are managed."""
    gang_scheduling: Literal["Auto", "Disabled"] = "Auto"
    """Whole-gang placement by kube-scheduler. ``Auto``: when the cluster serves the PodGroup API
    (``scheduling.k8s.io/v1beta1``: Kubernetes 1.37 with the ``GenericWorkload`` feature gate;
    else ``v1alpha2``: 1.36 with ``GenericWorkload`` and ``GangScheduling``), the pods of each
    kqueue workload name one PodGroup, which kqueue sizes to the admitted pods before releasing
    them, and kube-scheduler binds them all or none. ``Disabled``: admitted pods are placed one
    by one, as on clusters without the API."""
    topology_hand_off: Literal["NodeSelector", "NodeSelectorAndConstraint", "Constraint"] = (
        "NodeSelector"
    )
    """What the PodGroup of a topology-placed gang tells kube-scheduler
    (``scheduling.k8s.io/v1beta1`` with the ``TopologyAwareWorkloadScheduling`` gate).
    ``NodeSelector``: nothing; each pod carries its assigned domain's node selector. ``NodeSelectorAndConstraint``: the same, and
    the group's ``schedulingConstraints.topology`` key is the pod set's required level.
    ``Constraint``: the key only; the pods keep the flavor's node labels, kube-scheduler picks the
    domain; kqueue's books keep the domain it assigned until every pod is bound, then follow the
    binding (re-booking a not yet bound gang booked where it landed). Only for workloads whose
    every pod set requires one level (docs/topology.md); where the cluster refuses the field, pods
    are pinned."""
    node_fit_guard: Literal["Gangs", "Disabled"] = "Gangs"
    """The node-fit guard, for ClusterQueues that do not set ``spec.nodeFitGuard``. ``Gangs``:
    kqueue releases an admitted workload's pods (2 or more at a time) only when all of them fit
    on the nodes' free capacity now (flavor node labels, taints and tolerations, node selectors
    and required node affinity, bound pods, pods released but not bound yet); until then the
    workload keeps its quota, held, and its ``NodesFit`` condition gives the numbers.
    ``Disabled``: pods are released as soon as the workload is admitted."""
    managed_jobs_namespace_selector: LabelSelector = default_managed_namespace_selector(
        DEFAULT_NAMESPACE
    )
    """Namespaces whose jobs and pods kqueue manages. The default excludes ``kube-system`` and
    ``namespace``."""
    manage_jobs_without_queue_name: bool = False
    """Also manage Jobs that carry no ``kqueue.io/queue-name`` label, in the namespaces
    ``managedJobsNamespaceSelector`` selects: their pods are held until their Workload is
    admitted, from the namespace's LocalQueue named ``default`` (without one it stays pending)."""
    internal_cert_management: InternalCertManagement = InternalCertManagement()
    """Self-managed webhook certificates."""
    logging: Logging = Logging()
    """Log output."""
    fair_sharing: FairSharing | None = None
    """Fair sharing of unused quota among the ClusterQueues and Cohorts of a cohort tree
    (Kueue's fairSharing): set (``{}`` for the defaults) to order admission by weighted share and
    to preempt with reason ``InCohortFairSharing``; unset (the default) keeps the classical
    borrowing and priority order."""
    admission_fair_sharing: AdmissionFairSharing | None = None
    """Admission fair sharing between the LocalQueues of a ClusterQueue (Kueue's
    admissionFairSharing): set to let ClusterQueues with ``admissionScope.admissionMode:
    UsageBasedAdmissionFairSharing`` take their heads from the LocalQueue with the lowest
    weighted, decaying usage first. Unset (the default): such ClusterQueues order by priority and
    creation time, and say so in their status. See docs/fair-sharing.md."""
    preemption_protection: PreemptionProtection | None = None
    """Preemption protection (a minimum admitted time before preemption, per path), e.g.
    ``{reclaimWithinCohort: {minAdmitDuration: 10m}}``. Unset (the default): no workload is
    protected unless its ClusterQueue's ``spec.preemption.protection`` says so. See
    docs/concepts.md, "Preemption protection"."""

    resources: Resources = Resources()
    """How resources are counted against quota: transformations, excluded prefixes and DRA
    DeviceClasses as quota resources."""
    multi_kueue: MultiKueue = MultiKueue()
    """MultiKueue (the ``kqueue.io/multikueue`` admission check): garbage collection, origin
    label, worker-lost timeout and dispatcher."""

    feature_gates: dict[str, bool] = Field(default_factory=dict)
    """Kueue's feature gates by name (Kueue v0.19 defaults when unset). kqueue honours
    ``AdmissionFairSharing`` (false: ``admissionFairSharing`` is ignored),
    ``TopologyAwareScheduling`` (false: topology requests and flavors' ``topologyName`` are
    ignored), ``PartialAdmission`` (false: pod sets' ``minCount`` is ignored) and
    ``ElasticJobsViaWorkloadSlices`` (false: the elastic-job annotation has no effect: the Job
    webhook and reconciler treat such a Job as any other, and a slice is admitted as a new
    workload, not as a replacement), ``TASFailedNodeReplacement`` (false: a failed node under a topology-placed
    workload is only reported, not replaced) and ``TASReplaceNodeOnNodeTaints`` (false: a
    node's taints do not make it lost), ``KueueDRAIntegration`` (false: device claims take no quota;
    a workload with claims is ``Misconfigured`` unless ``KueueDRARejectWorkloadsWhenDRADisabled``
    is false too), ``KueueDRAIntegrationExtendedResource`` (false: a DRA-backed extended
    resource is a container request) and ``KueueDRAIntegrationPartitionableDevices`` (false:
    counter sources are refused); each set to false is noted with what it changes at start-up
    and by simulate and convert (docs/dra.md). The gates whose behaviour kqueue always has are accepted at that value; every
    other gate is logged as a warning at start-up (and by simulate and convert), naming it. The
    lists are in kqueue/api/feature_gates.py."""

    @model_validator(mode="after")
    def _counter_sources_gated(self) -> Configuration:
        # Kueue's config validation: counter sources need KueueDRAIntegrationPartitionableDevices.
        if feature_gates.gate(self.feature_gates, feature_gates.KUEUE_DRA_PARTITIONABLE_DEVICES):
            return self
        for i, m in enumerate(self.resources.device_class_mappings):
            if m.sources:
                raise ValueError(
                    f"resources.deviceClassMappings[{i}].sources[0].counter: counter sources "
                    "require KueueDRAIntegrationPartitionableDevices to be enabled "
                    "(featureGates.KueueDRAIntegrationPartitionableDevices is false)"
                )
        return self

    @model_validator(mode="after")
    def _gated_sections(self) -> Configuration:
        # A section whose gate is off is as good as absent: the engine then never sees it.
        if self.admission_fair_sharing is not None and not feature_gates.gate(
            self.feature_gates, feature_gates.ADMISSION_FAIR_SHARING
        ):
            return self.model_copy(update={"admission_fair_sharing": None})
        return self

    @model_validator(mode="before")
    @classmethod
    def _namespace_defaults(cls, data: Any) -> Any:
        # The namespace selector's default names the configured namespace, so it is filled in
        # here, before field validation, only when the user did not give one.
        if not isinstance(data, dict):
            return data
        namespace = data.get("namespace", DEFAULT_NAMESPACE)
        if not isinstance(namespace, str):
            return data
        if (
            "managedJobsNamespaceSelector" not in data
            and "managed_jobs_namespace_selector" not in data
        ):
            data = {
                **data,
                "managedJobsNamespaceSelector": default_managed_namespace_selector(namespace),
            }
        return data

    @field_validator("namespace")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(
                f"{value!r} is not a valid namespace name (lowercase letters, digits and '-', "
                "at most 63 characters, starting and ending with a letter or digit)"
            )
        return value

    @property
    def lease_namespace(self) -> str:
        """Namespace of the leader election Lease."""
        return self.leader_election.resource_namespace or self.namespace


# ---------------------------------------------------------------------------------------------
# Loading and dumping
# ---------------------------------------------------------------------------------------------


class ConfigurationError(ValueError):
    """An invalid configuration; ``problems`` lists ``(field path, message)`` pairs."""

    def __init__(self, problems: Sequence[tuple[str, str]], *, source: str = "configuration"):
        self.problems = list(problems)
        self.source = source
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.problems]
        super().__init__(f"invalid {source}:\n  " + "\n  ".join(lines))


def _field_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


# Model validators prefix their message with the offending field ("leaseDuration: ..."), which
# belongs in the path rather than in the message.
_MESSAGE_FIELD: Final = re.compile(r"^(?P<field>[A-Za-z][A-Za-z0-9]*|\[\d+\]): (?P<msg>.*)$", re.S)


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        msg = str(err["msg"])
        if err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
            ctx_error = err.get("ctx", {}).get("error")
            if isinstance(ctx_error, ValueError):
                msg = str(ctx_error)
        m = _MESSAGE_FIELD.match(msg) if err["type"] == "value_error" else None
        if m is not None:
            field = m.group("field")
            loc = [*loc, int(field[1:-1])] if field.startswith("[") else [*loc, field]
            msg = m.group("msg")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "literal_error":
            msg = f"{msg}, got {err['input']!r}"
        problems.append((_field_path(loc), msg))
    return problems


def parse_configuration(data: Mapping[str, Any], *, source: str = "configuration") -> Configuration:
    """Validate an already-decoded configuration document."""
    try:
        return Configuration.model_validate(data)
    except ValidationError as exc:
        raise ConfigurationError(_problems(exc), source=source) from None


def load_configuration(text: str, *, source: str = "configuration") -> Configuration:
    """Parse and validate a YAML (or JSON) configuration document.

    An empty document gives the defaults. Errors raise :class:`ConfigurationError` naming each
    offending field, e.g. ``waitForPodsReady.timeout: '5x' is not a duration ...``.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError([("", f"not valid YAML: {exc}")], source=source) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigurationError(
            [("", f"expected a mapping at the top level, got {type(data).__name__}")],
            source=source,
        )
    return parse_configuration(data, source=source)


def configuration_to_dict(config: Configuration) -> dict[str, Any]:
    """The configuration as a JSON-compatible document with camelCase keys."""
    return config.model_dump(mode="json", by_alias=True)


def dump_configuration(config: Configuration) -> str:
    """The configuration as YAML; :func:`load_configuration` reads it back unchanged."""
    return yaml.safe_dump(configuration_to_dict(config), sort_keys=False)


# ---------------------------------------------------------------------------------------------
# Reference documentation
# ---------------------------------------------------------------------------------------------


def _alias(model: type[BaseModel], name: str) -> str:
    alias = model.model_fields[name].alias
    return alias if alias is not None else to_camel(name)


def _is_duration(annotation: Any) -> bool:
    return (
        typing.get_origin(annotation) is Annotated and typing.get_args(annotation)[0] is timedelta
    )


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is timedelta or _is_duration(annotation):
        return "duration"
    if origin is Annotated:
        if any(getattr(m, "func", None) is _weight_input for m in args[1:]):
            return "number"
        return _type_name(args[0])
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        names = " or ".join(_type_name(a) for a in inner)
        return f"{names} or null" if len(inner) < len(args) else names
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return {str: "string", int: "integer", bool: "boolean"}.get(annotation, str(annotation))


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _walk(
    model: type[BaseModel], prefix: str, defaults: Mapping[str, Any]
) -> Iterator[tuple[str, str, Any, str]]:
    """Yield (path, type, default, description) for every field, depth first."""
    for name, info in model.model_fields.items():
        alias = _alias(model, name)
        path = f"{prefix}.{alias}" if prefix else alias
        default = defaults.get(alias)
        description = " ".join((info.description or "").replace("``", "`").split())
        yield path, _type_name(info.annotation), default, description
        nested = _nested_model(info.annotation)
        if nested is not None and nested is not LabelSelector:
            yield from _walk(nested, path, default if isinstance(default, dict) else {})
        section = _optional_section(info.annotation)
        if section is not None and default is None:
            # An optional section (fairSharing, admissionFairSharing): its fields with the
            # defaults they take when the section is set.
            yield from _walk(section, path, section().model_dump(by_alias=True, mode="json"))


def _optional_section(annotation: Any) -> type[BaseModel] | None:
    """``Model | None`` where ``Model()`` is valid: a section that its presence turns on."""
    if typing.get_origin(annotation) not in (types.UnionType, typing.Union):
        return None
    inner = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(inner) != 1 or not isinstance(inner[0], type) or not issubclass(inner[0], _Model):
        return None
    try:
        inner[0]()
    except ValueError:
        return None
    return inner[0]


def _markdown_value(value: Any) -> str:
    if value is None:
        return "null"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("...").strip()
    return f"`{text}`".replace("|", "\\|")


def configuration_reference_markdown() -> str:
    """A Markdown reference of every configuration field with its type and default."""
    defaults = configuration_to_dict(Configuration())
    lines = [
        "# Controller configuration",
        "",
        f"The controller reads one YAML document of `apiVersion: {API_VERSION}`, "
        f"`kind: {KIND}` (`kqueue run --config FILE`). Every field is optional; "
        "unknown fields are rejected. Durations are Kubernetes duration strings such as "
        '`"15s"`, `"5m"` or `"1h30m"`.',
        "",
        "This page is generated from the model in `kqueue/api/config.py`; "
        "`config/controller_config.yaml` lists every field with its default.",
        "",
        "| Field | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    for path, type_name, default, description in _walk(Configuration, "", defaults):
        shown = (
            ""
            if isinstance(default, dict) and path != "managedJobsNamespaceSelector"
            else (_markdown_value(default))
        )
        cell = description.replace("|", "\\|")
        lines.append(f"| `{path}` | {type_name} | {shown} | {cell} |")
    return "\n".join(lines) + "\n"


def _comment(description: str, indent: str, width: int = 96) -> list[str]:
    words = " ".join(description.replace("``", "`").split()).split(" ")
    lines: list[str] = []
    current = ""
    for word in words:
        if current and len(indent) + 2 + len(current) + 1 + len(word) > width:
            lines.append(f"{indent}# {current}")
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(f"{indent}# {current}")
    return lines


def _yaml_lines(model: type[BaseModel], values: Mapping[str, Any], indent: str) -> list[str]:
    lines: list[str] = []
    for name, info in model.model_fields.items():
        alias = _alias(model, name)
        value = values.get(alias)
        lines.extend(_comment(info.description or "", indent))
        nested = _nested_model(info.annotation)
        if nested is not None and nested is not LabelSelector and isinstance(value, dict):
            lines.append(f"{indent}{alias}:")
            lines.extend(_yaml_lines(nested, value, indent + "  "))
        else:
            dumped = yaml.safe_dump({alias: value}, sort_keys=False, width=10_000)
            lines.extend(indent + line for line in dumped.rstrip("\n").split("\n"))
    return lines


def sample_configuration_yaml() -> str:
    """Every field at its default, each preceded by its description as a comment.

    This is ``config/controller_config.yaml``; a test keeps the file and this output equal.
    """
    header = [
        "# kqueue controller configuration: every field at its default.",
        "# Generated from kqueue/api/config.py (sample_configuration_yaml); see",
        "# docs/configuration.md for the reference.",
    ]
    body = _yaml_lines(Configuration, configuration_to_dict(Configuration()), "")
    return "\n".join(header + body) + "\n"
