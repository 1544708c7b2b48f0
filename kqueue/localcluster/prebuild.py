"""Build everything `make test` needs: the control plane, the operators of the default run and
promtool.

hack/test.sh runs this in the background, beside the tests without a cluster and the cluster
tests, so that on a cold machine (empty Go caches, nothing in ~/.cache/kqueue) the builds and the
tests share the two cores instead of taking turns. The builds run in two streams: Kubernetes (the
longest) on its own; beside it etcd, kwok, helm and promtool (what the control plane and the
tests without a cluster wait for), then the operators. Only the operators' tests need the
operators, and they run last (tests/fixtures/operators.py), so the cluster tests start as soon
as the control plane is built and the operators build at a lower CPU priority (``OPERATOR_NICE``)
in the time the tests leave idle. Each build takes its own lock, so a pytest session started
meanwhile waits for it instead of building twice; while this runs it holds
``build.PREBUILD_LOCK``, which tells such a session to leave the operators' builds to it.
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


# The operators' builds give way to the control plane's and to running tests (nice(1) steps).
OPERATOR_NICE = 10


def _the_rest() -> None:
    for c in build.components():
        if c.name != "kubernetes":
            build.ensure_component(c)
    promtool.ensure_built()
    for name in operators.default_names():
        operators.ensure_built(operators.get(name), nice=OPERATOR_NICE)


def _component(name: str) -> build.Component:
    return next(c for c in build.components() if c.name == name)


# The Kubernetes build is the longest (four binaries): it starts at once, on its own, and the
# rest (etcd, kwok, helm, promtool, then the operators) follows one by one beside it.
STREAMS: dict[str, Callable[[], object]] = {
    "kubernetes": _kubernetes,
    "etcd, kwok, helm, promtool, operators": _the_rest,
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

    with build.prebuilding():
        threads = [
            threading.Thread(target=run, args=item, name=item[0]) for item in STREAMS.items()
        ]
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
