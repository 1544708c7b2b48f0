#!/usr/bin/env python3
"""Write what the integration registry derives: the chart's per-integration RBAC
(charts/kqueue/templates/_integrations.tpl) and the table in docs/integrations.md.

    .venv/bin/python hack/gen-integrations.py            # write both
    .venv/bin/python hack/gen-integrations.py --check    # exit 1 if either is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from kqueue.controller.integrations.derived import (
    chart_rbac_template,
    chart_webhooks_template,
    docs_table,
)

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "kqueue" / "templates" / "_integrations.tpl"
DOCS = ROOT / "docs" / "integrations.md"
BEGIN, END = "<!-- integrations table: generated -->", "<!-- end of generated table -->"


def docs_text(current: str) -> str:
    table = f"{BEGIN}\n{docs_table()}{END}"
    return re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _m: table, current, flags=re.S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    wanted = {
        CHART: chart_rbac_template() + chart_webhooks_template(),
        DOCS: docs_text(DOCS.read_text()),
    }
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is out of date: run hack/gen-integrations.py")
        return 1 if stale else 0
    for p, text in wanted.items():
        p.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
