"""The Topology kind, topologyRequest from pod-template annotations, topologyAssignment shape."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import ValidationFailed, encode_assignment, parse_object


def _topology(levels: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": x} for x in levels]},
    }


def _workload(count: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "podSets": [
                {
                    "count": count,
                    "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {"containers": [{"name": "c"}]},
                    },
                }
            ]
        },
    }


def test_topology_round_trip() -> None:
    obj = parse_object(_topology(["block", "rack", "kubernetes.io/hostname"]))
    assert obj.to_dict()["spec"] == {
        "levels": [
            {"nodeLabel": "block"},
            {"nodeLabel": "rack"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    }


@pytest.mark.parametrize(
    ("levels", "field", "text"),
    [
        (["rack", "rack"], "spec.levels[1].nodeLabel", "duplicate nodeLabel 'rack'"),
        (["kubernetes.io/hostname", "rack"], "spec.levels[0].nodeLabel", "must be the last level"),
        (["bad label!"], "spec.levels[0].nodeLabel", "not a valid node label key"),
    ],
    ids=["duplicate level", "hostname not last", "invalid label"],
)
def test_topology_refused(levels: list[str], field: str, text: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_object(_topology(levels))
    assert field in str(exc.value) and text in str(exc.value)


def test_request_from_annotations() -> None:
    wl = parse_object(
        _workload(
            4,
            {
                "kqueue.io/podset-required-topology": "rack",
                "kqueue.io/podset-slice-required-topology": "kubernetes.io/hostname",
                "kqueue.io/podset-slice-size": "2",
                "kqueue.io/podset-group-name": "g",
            },
        )
    )
    ps = wl.to_dict()["spec"]["podSets"][0]
    assert ps["topologyRequest"] == {
        "required": "rack",
        "podSetGroupName": "g",
        "podSetSliceRequiredTopology": "kubernetes.io/hostname",
        "podSetSliceSize": 2,
    }


def test_multi_layer_request_from_annotation() -> None:
    layers = '[{"topology":"rack","size":4},{"topology":"kubernetes.io/hostname","size":2}]'
    wl = parse_object(_workload(8, {
        "kqueue.io/podset-required-topology": "block",
        "kqueue.io/podset-slice-required-topology-constraints": layers,
    }))
    assert wl.to_dict()["spec"]["podSets"][0]["topologyRequest"] == {
        "required": "block",
        "podsetSliceRequiredTopologyConstraints": [
            {"topology": "rack", "size": 4}, {"topology": "kubernetes.io/hostname", "size": 2},
        ],
    }


LAYERS = "kqueue.io/podset-slice-required-topology-constraints"


@pytest.mark.parametrize(
    ("annotations", "field", "text"),
    [
        (
            {
                "kqueue.io/podset-slice-required-topology": "rack",
                "kqueue.io/podset-slice-size": "3",
            },
            "spec.podSets[0].topologyRequest.podSetSliceSize",
            "must divide the pod set's count (4), got 3",
        ),
        (
            {"kqueue.io/podset-slice-size": "two"},
            "annotations[kqueue.io/podset-slice-size]",
            "must be a positive integer",
        ),
        (
            {"kqueue.io/podset-required-topology": "rack",
             "kqueue.io/podset-preferred-topology": "block"},
            "spec.podSets[0].topologyRequest",
            "more than one of required, preferred and unconstrained",
        ),
        (
            {"kqueue.io/podset-slice-size": "2"},
            "topologyRequest.podSetSliceRequiredTopology",
            "must be set when podSetSliceSize is set",
        ),
        (
            {LAYERS: '[{"topology":"rack","size":3}]'},
            "topologyRequest.podsetSliceRequiredTopologyConstraints[0].size",
            "must divide the pod set's count (4), got 3",
        ),
        (
            {LAYERS: '[{"topology":"rack","size":4},{"topology":"host","size":3}]'},
            "topologyRequest.podsetSliceRequiredTopologyConstraints[1].size",
            "must divide the size of the layer above (4), got 3",
        ),
        (
            {LAYERS: '[{"topology":"rack","size":4}]',
             "kqueue.io/podset-slice-required-topology": "rack",
             "kqueue.io/podset-slice-size": "4"},
            "topologyRequest.podsetSliceRequiredTopologyConstraints",
            "must not be set with podSetSliceRequiredTopology or podSetSliceSize",
        ),
        (
            {LAYERS: "rack=4"},
            f"annotations[{LAYERS}]",
            'must be a JSON list of at most 3 {"topology": <level>, "size": <pods>}',
        ),
    ],
    ids=["slice size not dividing count", "slice size not a number", "required and preferred",
         "slice size without level", "outer size not dividing count", "inner size not dividing outer", "both forms",
         "not JSON"],
)
def test_request_refused(annotations: dict[str, str], field: str, text: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_object(_workload(4, annotations))
    assert field in str(exc.value) and text in str(exc.value)


def test_flavor_with_topology_needs_node_labels() -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_object(
            {
                "apiVersion": "kqueue.io/v1alpha1",
                "kind": "ResourceFlavor",
                "metadata": {"name": "tas"},
                "spec": {"topologyName": "default"},
            }
        )
    assert "spec.nodeLabels" in str(exc.value)


def test_assignment_encoding_is_kueues_compact_slice() -> None:
    ta = encode_assignment(
        ["rack", "kubernetes.io/hostname"],
        [(["r1", "x-1-a"], 2), (["r1", "x-2-a"], 2)],
    )
    assert ta.to_dict() == {
        "levels": ["rack", "kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "r1"},
                    {"individual": {"prefix": "x-", "suffix": "-a", "roots": ["1", "2"]}},
                ],
                "podCounts": {"universal": 2},
            }
        ],
    }
    assert ta.domains() == [(["r1", "x-1-a"], 2), (["r1", "x-2-a"], 2)]
