"""The plots of docs/benchmarks.md that are drawn from several result files.

    python bench/plots.py

Reads bench/results/{sim_shapes,e2e_baseline_*}.json (whichever exist) and writes
docs/img/e2e_baseline_admitted.png (admitted workloads over time, per run, with the same runs
from bench/results/before/ dashed) and
docs/img/time_to_admission.png (average time to admission per class: Kueue's published baseline,
the simulator, and each end-to-end run).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BEFORE = RESULTS / "before"
IMG = ROOT / "docs" / "img"
KUEUE = {"small": 215.0, "medium": 77.0, "large": 16.5}
CLASSES = ("small", "medium", "large")


def _label(r: dict) -> str:
    qps = f"QPS {r['qps']}" if r["qps"] > 0 else "unthrottled"
    return f"kqueue e2e x{r['scale']:g}, {qps}"


def main() -> None:
    runs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("e2e_baseline_*.json"))]
    IMG.mkdir(parents=True, exist_ok=True)
    # The same runs on the controller before its performance changes, dashed, where kept.
    before = {
        p.name: json.loads(p.read_text()) for p in sorted(BEFORE.glob("e2e_baseline_*.json"))
    }
    if runs:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        names = sorted(p.name for p in RESULTS.glob("e2e_baseline_*.json"))
        for i, (name, r) in enumerate(zip(names, runs, strict=True)):
            s = r["series"]
            ax.plot([x["t"] for x in s], [x["admittedTotal"] for x in s], color=f"C{i}",
                    label=_label(r))
            if name in before:
                s = before[name]["series"]
                ax.plot([x["t"] for x in s], [x["admittedTotal"] for x in s], color=f"C{i}",
                        linestyle="--", alpha=0.7, label=_label(r) + " (before)")
        ax.set(xlabel="seconds since the first arrival", ylabel="kqueue_admitted_workloads_total",
               title="baseline shape on the real API server: admissions over time")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(IMG / "e2e_baseline_admitted.png", dpi=110)

    bars: list[tuple[str, dict[str, float]]] = [("Kueue published baseline", KUEUE)]
    sim = RESULTS / "sim_shapes.json"
    if sim.exists():
        for r in json.loads(sim.read_text()):
            if r["shape"] == "baseline":
                bars.append(("kqueue simulator", {
                    k: v["averageTimeToAdmissionMs"] / 1000 for k, v in r["workloadClasses"].items()
                }))
    for r in runs:
        bars.append((_label(r), {
            k: v["averageTimeToAdmissionSeconds"] or 0.0 for k, v in r["classes"].items()
        }))
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(bars)
    for i, (name, vals) in enumerate(bars):
        xs = [j + i * width for j in range(len(CLASSES))]
        ax.bar(xs, [vals.get(k, 0.0) for k in CLASSES], width, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(CLASSES))], CLASSES)
    ax.set(ylabel="average time to admission (s)", title="baseline shape, per workload class")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(IMG / "time_to_admission.png", dpi=110)


if __name__ == "__main__":
    main()
