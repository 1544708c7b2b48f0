"""promtool, Prometheus' rule checker, built from its Go module like the control plane.

The chart's PrometheusRule ships rules that must parse and evaluate as Prometheus reads them;
``promtool check rules`` and ``promtool test rules`` are the authority. promtool is one
component of :mod:`.build` (the same wrapper module, cache under ``~/.cache/kqueue/bin``, stamp
and lock), built on first use: nothing builds it unless a test or a person asks for it.

Prometheus 3.x publishes its Go module as ``v0.3MM.P`` for release ``3.MM.P``. The build tag
``remove_all_sd`` leaves out the service-discovery plugins (cloud SDKs) promtool does not need to
check rules, which cuts the build to a few minutes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kqueue.localcluster import build

PROMETHEUS_MODULE_VERSION = os.environ.get("KQUEUE_PROMETHEUS_VERSION", "v0.316.0")

_VERSION_PKG = "github.com/prometheus/common/version"


def release(module_version: str) -> str:
    """Prometheus' release for its Go module version: ``v0.316.0`` -> ``3.16.0``."""
    m = re.fullmatch(r"v0\.(\d)(\d\d)\.(\d+)", module_version)
    if not m:
        return module_version.lstrip("v")
    return f"{m.group(1)}.{int(m.group(2))}.{m.group(3)}"


def _ldflags() -> list[str]:
    # `promtool --version` then prints the release and, as its revision, the module version
    # (which the build's version check looks for).
    return [
        f"-X {_VERSION_PKG}.Version={release(PROMETHEUS_MODULE_VERSION)}",
        f"-X {_VERSION_PKG}.Revision={PROMETHEUS_MODULE_VERSION}",
    ]


def component() -> build.Component:
    return build.Component(
        name="promtool",
        module="github.com/prometheus/prometheus",
        version=PROMETHEUS_MODULE_VERSION,
        binaries=(("github.com/prometheus/prometheus/cmd/promtool", "promtool"),),
        tags=("remove_all_sd",),
        ldflags=_ldflags,
        version_args={"promtool": ["--version"]},
    )


def built() -> Path | None:
    """promtool if it is already built (no build, no lock)."""
    c = component()
    out_dir = build.cache_dir() / "bin" / c.dir_name
    return out_dir / "promtool" if build.stamp_ok(c, out_dir) else None


def ensure_built(*, force: bool = False, nice: int = 0) -> Path:
    """Build promtool if needed (its own lock, beside the control plane's) and return its path;
    ``nice`` > 0 builds it at that lower CPU priority.

    Raises :class:`build.BuildError` saying why when it cannot be built (no Go toolchain, the
    module proxy refuses the version, a compile error).
    """
    return build.ensure_component(component(), force=force, nice=nice) / "promtool"


def main() -> int:
    print(ensure_built())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
