"""The fake nodes kwok simulates, and the pod life cycle it plays on them.

Samples (``config/samples/``) and tests match these names, labels and taints; they are
documented in ``docs/local-cluster.md``. Change them only together with the samples.

Pod life cycle on a kwok node (no containers run; kwok writes the statuses a kubelet would):

* bound to a node -> ``Running`` and ``Ready`` at once, with a pod IP;
* annotation ``kwok.kqueue.io/complete-after: <duration>`` (Go syntax: ``500ms``, ``10s``,
  ``2m``) -> ``Succeeded`` (exit code 0) that long after it started running;
* annotation ``kwok.kqueue.io/fail-after: <duration>`` -> ``Failed`` (exit code 1);
* neither -> runs until deleted (a long-running pod tests can rely on);
* deleted -> containers terminate (exit code 143, phase ``Failed``, as a kubelet reports a
  killed container), after ``kwok.kqueue.io/terminate-after`` if set (default at once); the pod
  object goes away once its finalizers are gone (the Job controller removes its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The annotation kwok-managed nodes carry; kwok runs with a selector on it so that it never
# touches nodes it did not create.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"

COMPLETE_AFTER_ANNOTATION = "kwok.kqueue.io/complete-after"
FAIL_AFTER_ANNOTATION = "kwok.kqueue.io/fail-after"
TERMINATE_AFTER_ANNOTATION = "kwok.kqueue.io/terminate-after"

INSTANCE_TYPE_LABEL = "instance-type"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
SPOT_TAINT = {"key": "spot", "value": "true", "effect": "NoSchedule"}
# Topology-aware scheduling nodes: 2 blocks x 2 racks x 4 hosts, small (4 cpu) so that a rack
# holds 16 cpu and placement, not quota, is what a test runs into; tainted so that only pods
# admitted with a flavor tolerating it (docs/topology.md) land there.
TAS_NODE_GROUP_LABEL = "node-group"
TAS_NODE_GROUP = "tas"
TAS_BLOCK_LABEL = "cloud.kqueue.io/block"
TAS_RACK_LABEL = "cloud.kqueue.io/rack"
TAS_TAINT = {"key": TAS_NODE_GROUP_LABEL, "value": TAS_NODE_GROUP, "effect": "NoSchedule"}


@dataclass(frozen=True)
class FakeNode:
    name: str
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...] = ()
    # Generous so that placement never blocks a test: quota, not nodes, is what kqueue limits.
    allocatable: dict[str, str] = field(
        default_factory=lambda: {"cpu": "64", "memory": "256Gi", "pods": "110"}
    )

    def manifest(self) -> dict[str, Any]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **self.labels,
        }
        resources = {"ephemeral-storage": "1Ti", **self.allocatable}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {
                    KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE,
                    "node.alpha.kubernetes.io/ttl": "0",
                },
            },
            "spec": {"taints": [dict(t) for t in self.taints]},
            "status": {
                "allocatable": resources,
                "capacity": resources,
                "nodeInfo": {"operatingSystem": "linux", "architecture": "amd64"},
            },
        }


def _node(name: str, zone: str, labels: dict[str, str], **kw: Any) -> FakeNode:
    return FakeNode(name=name, labels={"topology.kubernetes.io/zone": zone, **labels}, **kw)


TOPOLOGY_NODES: tuple[FakeNode, ...] = tuple(
    FakeNode(
        name=f"kwok-tas-b{b}-r{r}-n{n}",
        labels={
            TAS_NODE_GROUP_LABEL: TAS_NODE_GROUP,
            TAS_BLOCK_LABEL: f"b{b}",
            TAS_RACK_LABEL: f"b{b}-r{r}",
        },
        taints=(TAS_TAINT,),
        allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
    )
    for b in (1, 2)
    for r in (1, 2)
    for n in (1, 2, 3, 4)
)

DEFAULT_NODES: tuple[FakeNode, ...] = (
    _node("kwok-on-demand-1", "zone-a", {INSTANCE_TYPE_LABEL: "on-demand"}),
    _node("kwok-on-demand-2", "zone-b", {INSTANCE_TYPE_LABEL: "on-demand"}),
    _node("kwok-spot-1", "zone-a", {INSTANCE_TYPE_LABEL: "spot"}, taints=(SPOT_TAINT,)),
    _node("kwok-spot-2", "zone-b", {INSTANCE_TYPE_LABEL: "spot"}, taints=(SPOT_TAINT,)),
    _node(
        "kwok-gpu-1",
        "zone-a",
        {INSTANCE_TYPE_LABEL: "gpu", GPU_PRODUCT_LABEL: "A100"},
        allocatable={"cpu": "64", "memory": "256Gi", "pods": "110", GPU_RESOURCE: "8"},
    ),
    *TOPOLOGY_NODES,
)


# kwok Stage objects (kwok.x-k8s.io/v1alpha1), given to kwok as its configuration file. The
# node stages are kwok's own "fast" node set; the pod stages implement the life cycle above.
_POD_RUNNING_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodScheduled
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
{{ with $podIPs }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def _terminated_status(phase: str, exit_code: int, reason: str) -> str:
    # Ready turns False as a kubelet reports it for a finished pod; the started time of each
    # container is kept from its running state.
    return f"""\
{{{{ $now := Now }}}}
{{{{ $root := . }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "True"
  type: PodScheduled
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "True"
  type: Initialized
- lastTransitionTime: {{{{ $now | Quote }}}}
  reason: PodCompleted
  status: "False"
  type: Ready
- lastTransitionTime: {{{{ $now | Quote }}}}
  reason: PodCompleted
  status: "False"
  type: ContainersReady
containerStatuses:
{{{{ range $index, $item := .spec.containers }}}}
- image: {{{{ $item.image | Quote }}}}
  name: {{{{ $item.name | Quote }}}}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: {exit_code}
      finishedAt: {{{{ $now | Quote }}}}
      reason: {reason}
      startedAt: {{{{ or $root.status.startTime $now | Quote }}}}
{{{{ end }}}}
phase: {phase}
"""


def _annotation(name: str) -> str:
    return f'.metadata.annotations["{name}"]'


def _pod_stage(
    name: str,
    match: list[dict[str, Any]],
    next_: dict[str, Any],
    delay_annotation: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": match},
        "next": next_,
    }
    if delay_annotation:
        spec["delay"] = {
            "durationMilliseconds": 0,
            "durationFrom": {"expressionFrom": _annotation(delay_annotation)},
        }
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


_NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}


def _phase_in(*phases: str) -> dict[str, Any]:
    return {"key": ".status.phase", "operator": "In", "values": list(phases)}


def _has(annotation: str) -> dict[str, Any]:
    return {"key": _annotation(annotation), "operator": "Exists"}


def _ready() -> dict[str, Any]:
    return {
        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
        "operator": "In",
        "values": ["True"],
    }


def pod_stages() -> list[dict[str, Any]]:
    return [
        _pod_stage(
            "kqueue-pod-running",
            [
                _NOT_DELETED,
                _phase_in("Pending"),
                {
                    "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                    "operator": "NotIn",
                    "values": ["True"],
                },
            ],
            {"statusTemplate": _POD_RUNNING_STATUS},
        ),
        _pod_stage(
            "kqueue-pod-complete",
            [_NOT_DELETED, _phase_in("Running"), _ready(), _has(COMPLETE_AFTER_ANNOTATION)],
            {"statusTemplate": _terminated_status("Succeeded", 0, "Completed")},
            delay_annotation=COMPLETE_AFTER_ANNOTATION,
        ),
        _pod_stage(
            "kqueue-pod-fail",
            [_NOT_DELETED, _phase_in("Running"), _ready(), _has(FAIL_AFTER_ANNOTATION)],
            {"statusTemplate": _terminated_status("Failed", 1, "Error")},
            delay_annotation=FAIL_AFTER_ANNOTATION,
        ),
        _pod_stage(
            "kqueue-pod-terminate",
            [_DELETED, _phase_in("Pending", "Running")],
            {"statusTemplate": _terminated_status("Failed", 143, "Error")},
            delay_annotation=TERMINATE_AFTER_ANNOTATION,
        ),
        _pod_stage(
            "kqueue-pod-delete",
            [
                _DELETED,
                _phase_in("Succeeded", "Failed"),
                {"key": ".metadata.finalizers", "operator": "DoesNotExist"},
            ],
            {"delete": True},
        ),
    ]


_NODE_INITIALIZE_STATUS = """\
{{ $now := Now }}
{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
allocatable:
{{ with .status.allocatable }}
{{ YAML . 1 }}
{{ end }}
capacity:
{{ with .status.capacity }}
{{ YAML . 1 }}
{{ end }}
{{ $nodeInfo := .status.nodeInfo }}
{{ $kwokVersion := printf "kwok-%s" Version }}
nodeInfo:
  architecture: {{ or $nodeInfo.architecture "amd64" }}
  bootID: {{ or $nodeInfo.bootID `""` }}
  containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion $kwokVersion }}
  kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}
  kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}
  kubeletVersion: {{ or $nodeInfo.kubeletVersion $kwokVersion }}
  machineID: {{ or $nodeInfo.machineID `""` }}
  operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
  osImage: {{ or $nodeInfo.osImage `""` }}
  systemUUID: {{ or $nodeInfo.systemUUID `""` }}
phase: Running
"""


def node_stages() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "kqueue-node-initialize"},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Node"},
                "selector": {
                    "matchExpressions": [
                        {
                            "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                            "operator": "NotIn",
                            "values": ["True"],
                        }
                    ]
                },
                "next": {"statusTemplate": _NODE_INITIALIZE_STATUS},
            },
        }
    ]


def kwok_config_documents() -> list[dict[str, Any]]:
    """Everything kwok reads from its ``--config`` file."""
    return [*node_stages(), *pod_stages()]
