"""Helpers for the simulator tests: run the CLI in-process and read its JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kqueue.cli.main import cli

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios"


def run_cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def simulate_json(*args: str, input: str | None = None) -> dict[str, Any]:
    result = run_cli("simulate", "-o", "json", *args, input=input)
    assert result.exit_code == 0, result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert isinstance(out, dict)
    return out


@pytest.fixture
def scenarios() -> Path:
    return SCENARIOS
