"""owner_uids reads a Workload model as it reads the same object as a dict."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload, parse_object
from kqueue.controller.integrations.owners import owner_uids


def _doc(refs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "ownerReferences": refs},
        "spec": {"podSets": [{"name": "main", "template": {"spec": {"containers": []}}}]},
    }


def _ref(uid: str, controller: bool | None, **extra: Any) -> dict[str, Any]:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, **extra}
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(
    ("refs", "want"),
    [
        pytest.param([], [], id="no owners"),
        pytest.param([_ref("u1", True)], ["u1"], id="controller"),
        pytest.param([_ref("u1", False), _ref("u2", None)], [], id="owners, none controlling"),
        pytest.param([_ref("", True)], [], id="controller without uid"),
        pytest.param([_ref("u1", True, blockOwnerDeletion=True), _ref("u2", True)],
                     ["u1", "u2"], id="two controllers (kept in order)"),
    ],
)
def test_model_and_dict_agree(refs: list[dict[str, Any]], want: list[str]) -> None:
    doc = _doc(refs)
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    assert owner_uids(wl) == owner_uids(doc) == want
