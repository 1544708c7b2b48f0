#!/usr/bin/env python3
"""Write the `config` part of charts/kqueue/values.schema.json from the Configuration model.

The chart renders its `config` value into the controller's configuration file, so the schema
of that value is the model's (kqueue/api/config_schema.py): Helm then refuses at install time
what the controller would refuse at start-up. The rest of values.schema.json (the chart's own
values) is written by hand and kept as it is. tests/chart/test_values_schema.py fails when the
file is out of date. `make config-docs` runs this script.

    .venv/bin/python hack/gen-chart-schema.py            # rewrite the config schema
    .venv/bin/python hack/gen-chart-schema.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kqueue.api.config import API_VERSION
from kqueue.api.config_schema import UnmappedValidatorError, configuration_json_schema

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "charts" / "kqueue" / "values.schema.json"

CONFIG_DESCRIPTION = (
    f"The controller Configuration ({API_VERSION}), rendered into the ConfigMap the controller "
    "reads; generated from kqueue/api/config.py by hack/gen-chart-schema.py, see "
    "docs/configuration.md."
)


def dumps(schema: Any) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def render(current: str) -> str:
    """values.schema.json with its `config` property generated from the model."""
    schema = json.loads(current)
    properties = schema["properties"]
    config = {**configuration_json_schema(), "description": CONFIG_DESCRIPTION}
    # Keep the property where it is, so a regeneration only shows real changes.
    schema["properties"] = {
        name: (config if name == "config" else value) for name, value in properties.items()
    }
    if "config" not in properties:
        schema["properties"]["config"] = config
    return dumps(schema)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check it is up to date")
    args = parser.parse_args(argv)
    current = TARGET.read_text()
    try:
        text = render(current)
    except UnmappedValidatorError as exc:
        print(f"{TARGET}: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if current != text:
            print(f"{TARGET} is out of date; run `make config-docs`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text)
        print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
