"""Static checks run as part of the test suite, so `make test` (and CI) enforce them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    if not exe.exists():
        found = shutil.which(tool)
        if found is None:
            pytest.fail(f"{tool} is not installed; run `make venv` (it is in the dev extra)")
        exe = Path(found)
    return subprocess.run(
        [str(exe), *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=600
    )


def test_layer_contracts() -> None:
    """api < engine < controller|localcluster < cli, and no I/O libraries below the controller."""
    res = _run("lint-imports", "--no-cache")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff() -> None:
    targets = [d for d in ("kqueue", "tests", "bench", "hack") if (ROOT / d).is_dir()]
    res = _run("ruff", "check", *targets)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy() -> None:
    """Strict for kqueue.api and kqueue.engine (see pyproject), checked for the rest."""
    res = _run("mypy")
    assert res.returncode == 0, res.stdout + res.stderr
