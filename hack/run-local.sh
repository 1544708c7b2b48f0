#!/usr/bin/env bash
# `make run`: kqueue against a local control plane with the quickstart samples; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
exec "$VENV/bin/python" hack/run_local.py "$@"
