"""Build everything `make test` needs before its cluster tests start: the control plane, the
operators of the default run and promtool.

hack/test.sh runs this in the background while the unit tests run, so that on a cold machine
(empty Go caches, nothing in ~/.cache/kqueue) the builds and the unit tests share the two cores
instead of taking turns. The builds run in two streams (the control plane; the operators, then
promtool): one stream's module downloads and links leave the CPU to the other's compiles. Each
build takes its own lock, so a pytest session started meanwhile waits for it instead of
building twice.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

from kqueue.localcluster import build, operators, promtool


def _operators_then_promtool() -> None:
    for name in operators.default_names():
        operators.ensure_built(operators.get(name))
    promtool.ensure_built()


STREAMS: dict[str, Callable[[], object]] = {
    "control plane": build.ensure_binaries,
    "operators and promtool": _operators_then_promtool,
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
    for name, err in errors.items():
        build.log(f"FAILED ({name}): {err}")
    build.log(f"prebuild done in {(time.monotonic() - started) / 60:.1f} min")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
