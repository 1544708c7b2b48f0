"""Does the cycle's growth at large backlogs come from the garbage collector?

    python bench/engine_gc.py [--out bench/results/engine_cycle_gc_frozen.json]

Builds the engine_cycle.py engine (1,000 ClusterQueues, 10 cohorts) with 50,000 and 100,000
pending workloads, moves everything built so far out of the collector's reach
(``gc.freeze()``), and times the first cycle in CPU time, to compare with engine_cycle.py's
figures for the same sizes without the freeze.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_cycle import START, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/engine_cycle_gc_frozen.json"))
    args = parser.parse_args()
    out = []
    for pending in (50_000, 100_000):
        engine = build(1_000, 10, pending)
        gc.collect()
        gc.freeze()
        t0 = time.process_time()
        result = engine.schedule(START + timedelta(days=1))
        ms = 1000 * (time.process_time() - t0)
        row = {"clusterQueues": 1_000, "pending": pending, "heads": result.heads,
               "msPerCycleGcFrozen": round(ms, 1)}
        print(json.dumps(row), flush=True)
        out.append(row)
        gc.unfreeze()
        del engine, result
        gc.collect()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
