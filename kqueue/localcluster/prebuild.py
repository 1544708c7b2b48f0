"""Build everything `make test` needs: the control plane and the operators of the default run.

hack/test.sh runs this in the background, beside the tests without a cluster and the cluster
tests, so that on a cold machine (empty Go caches, nothing in ~/.cache/kqueue) the builds and the
tests share the two cores instead of taking turns. The order is the order in which the tests need
the builds (docs/local-cluster.md, "CI"):

1. the control plane the cluster tests wait for, at normal priority, in two streams so that both
   cores work on it: Kubernetes (~1,000 CPU-s cold) in one; etcd (~190) and kwok (~510) in the
   other;
2. then, at a lower CPU priority (``LATE_NICE``, in the time the running tests leave idle), what
   only some tests need and wait for where they need it, in the stream that ends first: helm
   (~480; the chart tests wait for it, tests/fixtures/tools.py), then the operators (their tests
   run last, tests/fixtures/operators.py). At normal priority helm took ~4 minutes of both cores
   from Kubernetes' build, which every cluster test waits for.

hack/test.sh starts Kubernetes' build earlier still, with the system Python while pip makes the
virtualenv; this stream then finds it under its lock.

promtool is not built: its tests are opt-in (`make test-promtool`, tests/fixtures/opt_in.py).

Each build takes its own lock, so a pytest session started meanwhile waits for it instead of
building twice; while this runs it holds ``build.PREBUILD_LOCK``, which tells such a session to
leave the operators' builds to it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

from kqueue.localcluster import build, operators


def _component(name: str) -> build.Component:
    return next(c for c in build.components() if c.name == name)


# What no test waits for at once gives way to the control plane's build and to running tests
# (nice(1) steps).
LATE_NICE = 10


def _kubernetes() -> None:
    build.ensure_component(_component("kubernetes"))


def _etcd_kwok_then_helm_and_operators() -> None:
    for name in ("etcd", "kwok"):
        build.ensure_component(_component(name))
    # In the stream that ends first, so that they have the whole of Kubernetes' build and of the
    # timing-bound tests (which leave most of the CPU idle) before their tests to use what is
    # left: after Kubernetes they were still building when their tests' turn came (18 min at
    # nice 10).
    build.ensure_component(_component("helm"), nice=LATE_NICE)
    for name in operators.default_names():
        operators.ensure_built(operators.get(name), nice=LATE_NICE)


STREAMS: dict[str, Callable[[], object]] = {
    "kubernetes": _kubernetes,
    "etcd, kwok, then helm and the operators": _etcd_kwok_then_helm_and_operators,
}


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m kqueue.localcluster.prebuild",
        description="Build (or find cached) the control plane, helm and the default "
        f"operators ({', '.join(operators.default_names())}).",
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
            build.ensure_binaries()  # all built: links the binary set (helm with it)
        except build.BuildError as exc:
            errors["control plane"] = str(exc)
    for name, err in errors.items():
        build.log(f"FAILED ({name}): {err}")
    build.log(f"prebuild done in {(time.monotonic() - started) / 60:.1f} min")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
