"""Golden tests: every scenario in scenarios/*.yaml against its reviewed *.expected.json.

A scenario's first lines may carry ``# args: ...`` (extra command-line arguments). To regenerate
after a deliberate change: ``KQUEUE_UPDATE_GOLDEN=1 pytest tests/simulate/test_golden.py``, then
review every changed decision against Kueue's rules before committing (the scenario's header
comment says what must happen and why).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from .conftest import SCENARIOS, simulate_json

UPDATE = os.environ.get("KQUEUE_UPDATE_GOLDEN") == "1"


def _args(path: Path) -> list[str]:
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# args:"):
            return shlex.split(line.removeprefix("# args:"))
    return []


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    got = simulate_json(str(path), *_args(path))
    expected = path.with_name(path.stem + ".expected.json")
    if UPDATE:
        expected.write_text(json.dumps(got, indent=2) + "\n")
        pytest.skip("golden file rewritten; review it")
    assert expected.exists(), (
        f"no golden file; run with KQUEUE_UPDATE_GOLDEN=1 and review {expected}"
    )
    assert got == json.loads(expected.read_text())
