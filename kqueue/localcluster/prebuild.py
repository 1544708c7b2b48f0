"""Build everything `make test` needs before its cluster tests start: the control plane, the
operators of the default run and promtool.

hack/test.sh runs this in the background while the unit tests run, so that on a cold machine
(empty Go caches, nothing in ~/.cache/kqueue) the builds and the unit tests share the two cores
instead of taking turns. The builds run in two streams (Kubernetes, the longest; then etcd, kwok,
helm, the operators and promtool one after another): one stream's module downloads and links
leave the CPU to the other's compiles. Each build takes its own lock, so a pytest session
started meanwhile waits for it instead of building twice.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

from kqueue.localcluster import build, operators, promtool


def _kubernetes() -> None:
    build.ensure_component(_component("kubernetes"))


def _the_rest() -> None:
    for c in build.components():
        if c.name != "kubernetes":
            build.ensure_component(c)
    for name in operators.default_names():
        operators.ensure_built(operators.get(name))
    promtool.ensure_built()


def _component(name: str) -> build.Component:
    return next(c for c in build.components() if c.name == name)


# The Kubernetes build is the longest (four binaries): it starts at once, on its own, and the
# rest (etcd, kwok, helm, the operators, promtool) follows one by one beside it.
STREAMS: dict[str, Callable[[], object]] = {
    "kubernetes": _kubernetes,
    "etcd, kwok, helm, operators, promtool": _the_rest,
}


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m kqueue.localcluster.prebuild",
        description="Build (or find cached) the control plane, the default operators "
        f"({', '.join(operators.default_names())}) and promtool.",
    ).parse_args(argv)
    started = time.monotonic()
    errors: dict[str, str] = {}

    def run(name: str, fn: Callable[[], object]) -> None:
        t0 = time.monotonic()
        try:
            fn()
        except build.BuildError as exc:
            errors[name] = str(exc)
            return
        build.log(f"{name}: ready after {(time.monotonic() - t0) / 60:.1f} min")

    threads = [threading.Thread(target=run, args=item, name=item[0]) for item in STREAMS.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not errors:
        try:
            build.ensure_binaries()  # all built: links the control plane's binary set
        except build.BuildError as exc:
            errors["control plane"] = str(exc)
    for name, err in errors.items():
        build.log(f"FAILED ({name}): {err}")
    build.log(f"prebuild done in {(time.monotonic() - started) / 60:.1f} min")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
