#!/usr/bin/env python3
"""Write docs/configuration.md from the Configuration model (kqueue/api/config.py).

The field table is `configuration_reference_markdown()`; this script adds how the Helm chart
renders the same document. tests/chart/test_docs.py fails when the file is out of date.

    .venv/bin/python hack/gen-config-docs.py            # write docs/configuration.md
    .venv/bin/python hack/gen-config-docs.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kqueue.api.config import configuration_reference_markdown

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "configuration.md"

HELM_SECTION = """
## With the Helm chart

The chart renders this document into the ConfigMap `<release>-config` (key
`controller_config.yaml`) from the `config` value, so any field above can be set there:

```yaml
# values.yaml
config:
  waitForPodsReady:
    enable: true
    timeout: 10m
  manageJobsWithoutQueueName: false
```

The chart sets the fields that must agree with its other objects, and a value given for them
under `config` is overridden: `namespace` (the release namespace), `health.bindAddress`,
`metrics.bindAddress` and `webhook.port` (from `health.port`, `metrics.port` and
`webhook.containerPort`), `webhook.certDir` (inside the pod's `/tmp` emptyDir), and
`internalCertManagement` (enabled unless cert-manager or development mode is used; Service and
Secret names of the release). When `webhook.namespaceSelectorExpressions` is set and
`config.managedJobsNamespaceSelector` is not, the chart also sets the latter, so the controller
and the webhooks agree on which namespaces are managed.

The chart's `values.schema.json` checks `config` against this model (its `config` part is
generated from it by `hack/gen-chart-schema.py`, which `make config-docs` runs): Helm refuses a
configuration the controller would refuse, naming the field, except for the rules that compare
two fields (the `leaderElection` timings, `backoffMaxSeconds >= backoffBaseSeconds`) and
durations finer than a microsecond, which only the controller checks. The chart accepts only
the camelCase names above. See `charts/kqueue/README.md`.
"""


def render() -> str:
    return configuration_reference_markdown() + HELM_SECTION


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check it is up to date")
    args = parser.parse_args(argv)
    text = render()
    current = TARGET.read_text() if TARGET.exists() else None
    if args.check:
        if current != text:
            print(f"{TARGET} is out of date; run hack/gen-config-docs.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text)
        print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
