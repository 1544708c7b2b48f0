"""Summarise a py-spy ``--format raw`` profile (collapsed stacks) into a short table.

    python bench/profile_summary.py PROFILE.txt [--top 25] > SUMMARY.txt

Self time per function, and inclusive time per kqueue/library area (the first frame of the
stack that falls in one of the areas below, read from the leaf up), as % of samples. Idle
samples (the event loop waiting in select/epoll) are counted apart, because py-spy records
them only with --idle; without it the % is of busy time.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# Areas, most specific first; matched against a frame's "(file:line)".
AREAS = (
    ("engine (kqueue/engine)", "kqueue/engine/"),
    ("scheduler loop (kqueue/controller/scheduler.py)", "kqueue/controller/scheduler.py"),
    ("decision writes (kqueue/controller/decision_writer.py)", "kqueue/controller/decision_writer.py"),
    ("pending reasons (kqueue/controller/pending_reasons.py)", "kqueue/controller/pending_reasons.py"),
    ("status writes (kqueue/controller/status.py)", "kqueue/controller/status.py"),
    ("informers (kqueue/controller/informer.py)", "kqueue/controller/informer.py"),
    ("webhooks (kqueue/controller/webhook*)", "kqueue/controller/webhook"),
    ("workload reconcilers (kqueue/controller/workload_status.py)", "kqueue/controller/workload_status.py"),
    ("integrations (kqueue/controller/integrations)", "kqueue/controller/integrations/"),
    ("events (kqueue/controller/events.py)", "kqueue/controller/events.py"),
    ("API models (kqueue/api, pydantic)", "kqueue/api/"),
    ("pydantic", "pydantic"),
    ("JSON encode/decode", "json/"),
    ("HTTP client (aiohttp, kubernetes_asyncio)", "aiohttp/"),
    ("kubernetes_asyncio", "kubernetes_asyncio/"),
    ("ssl", "ssl.py"),
    ("other kqueue/controller", "kqueue/controller/"),
)

_LINE = re.compile(r"^(.*) (\d+)$")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    self_time: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text().splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        frames, n = m.group(1).split(";"), int(m.group(2))
        total += n
        leaf = re.sub(r":\d+\)$", ")", frames[-1])
        self_time[leaf] += n
        area = "other"
        for frame in reversed(frames):
            hit = next((name for name, key in AREAS if key in frame), None)
            if hit is not None:
                area = hit
                break
        areas[area] += n
    print(f"{args.profile.name}: {total} samples")
    print("\nby area (leaf-most matching frame), % of samples:")
    for name, n in areas.most_common():
        print(f"  {100 * n / total:5.1f}%  {name}")
    print(f"\ntop {args.top} functions by self time, % of samples:")
    for name, n in self_time.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
