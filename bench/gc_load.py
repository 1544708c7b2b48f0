"""The cyclic collector while a large Workload cache is first read, in one process, no cluster.

    python bench/gc_load.py --count 50000

Reads ``--count`` Workloads (bench/memory.py's, with the metadata an API server adds) from
500-item JSON list pages into models with the Workload informer's converter, as a cold start
does, three ways: the collector on (automatic collections), off (``collector_paused``), and
frozen after every page. Then one :func:`freeze_heap`. Prints the seconds of each step; the
figures depend on the machine (not a test, nothing here runs in ``make test``).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.memory import workload  # noqa: E402
from kqueue.controller.collector import freeze_heap  # noqa: E402
from kqueue.controller.kube import loads  # noqa: E402
from kqueue.controller.workload_reader import WorkloadReader  # noqa: E402

MODES = ("on", "off", "freeze-per-page")


def item(i: int) -> dict[str, Any]:
    doc = workload(i)
    doc["metadata"].update({
        "uid": f"00000000-0000-4000-8000-{i:012d}",
        "resourceVersion": str(100_000 + i),
        "generation": 1,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "managedFields": [{
            "manager": "bench", "operation": "Update", "apiVersion": doc["apiVersion"],
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}, "f:podSets": {}, "f:priority": {},
                                    "f:queueName": {}}},
        }],
    })
    return doc


def one(count: int, mode: str) -> None:
    pages = [
        json.dumps({"items": [item(i) for i in range(p, min(p + 500, count))]}).encode()
        for p in range(0, count, 500)
    ]
    if mode == "off":
        gc.disable()
    reader = WorkloadReader()
    store: dict[str, Any] = {}
    t0 = time.perf_counter()
    for raw in pages:
        for doc in loads(raw)["items"]:
            store[doc["metadata"]["name"]] = reader(doc)
        if mode == "freeze-per-page":
            gc.freeze()
    t1 = time.perf_counter()
    freeze_heap()
    t2 = time.perf_counter()
    print(json.dumps({"mode": mode, "count": count, "readSeconds": round(t1 - t0, 2),
                      "freezeHeapSeconds": round(t2 - t1, 2), "objects": len(store)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--mode", choices=MODES, help="one mode (default: each, in its own process)")
    args = parser.parse_args()
    if args.mode:
        one(args.count, args.mode)
        return
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for mode in MODES:  # a fresh process each: a clean heap and collector state
        subprocess.run([sys.executable, __file__, "--count", str(args.count), "--mode", mode],
                       check=True)


if __name__ == "__main__":
    main()
