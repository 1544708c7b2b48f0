"""RFC 6902 JSON Patch between two JSON documents, for mutating webhook responses.

Mutating handlers return the object as it should be; the server answers with the difference
as a patch, which is what the API server applies. Lists are diffed element by element (an
appended toleration is an ``add``, not a rewrite of the whole list), so patches stay small and
do not clobber concurrent changes to unrelated entries.
"""

from __future__ import annotations

import copy
from typing import Any

JsonPatch = list[dict[str, Any]]


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def json_patch(old: Any, new: Any) -> JsonPatch:
    """Operations that turn ``old`` into ``new``; empty when they are equal."""
    ops: JsonPatch = []
    _diff(old, new, "", ops)
    return ops


def _diff(old: Any, new: Any, path: str, ops: JsonPatch) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
            else:
                _diff(old[key], value, f"{path}/{_escape(key)}", ops)
        return
    if isinstance(old, list) and isinstance(new, list):
        common = min(len(old), len(new))
        for i in range(common):
            _diff(old[i], new[i], f"{path}/{i}", ops)
        for i in range(common, len(new)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": new[i]})
        # Remove from the end so earlier indexes stay valid.
        for i in range(len(old) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        return
    # bool is an int in Python but not in JSON: true -> 1 is a change.
    if old != new or type(old) is not type(new):
        ops.append({"op": "replace", "path": path, "value": new})


class PatchError(ValueError):
    """A patch that does not apply to the document."""


def apply_json_patch(doc: Any, ops: JsonPatch) -> Any:
    """Apply ``add``/``remove``/``replace``/``test`` operations to a copy of ``doc``."""
    result = copy.deepcopy(doc)
    for op in ops:
        path = op["path"]
        if path == "":
            if op["op"] in ("add", "replace"):
                result = copy.deepcopy(op["value"])
                continue
            if op["op"] == "test":
                if result != op["value"]:
                    raise PatchError(f"test failed at {path!r}")
                continue
            raise PatchError(f"cannot {op['op']} the whole document")
        tokens = [_unescape(t) for t in path.split("/")[1:]]
        parent = result
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[index]
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            elif kind == "test" and parent[index] != op["value"]:
                raise PatchError(f"test failed at {path!r}")
        else:
            if kind in ("add", "replace"):
                if kind == "replace" and last not in parent:
                    raise PatchError(f"nothing to replace at {path!r}")
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[last]
            elif kind == "test" and parent.get(last) != op["value"]:
                raise PatchError(f"test failed at {path!r}")
    return result
