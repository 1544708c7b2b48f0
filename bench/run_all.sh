#!/usr/bin/env bash
# Every benchmark, one after the other (`make bench`); results under bench/results/, plots under
# docs/img/. About 45 minutes on 2 cores; each script also runs alone (see docs/benchmarks.md).
set -eu
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
$PY bench/sim_shapes.py --out bench/results/sim_shapes.json
$PY bench/engine_cycle.py --out bench/results/engine_cycle.json \
    --plot docs/img/engine_cycle_scaling.png
bench/run_e2e_workloads.sh
# Section 4 compares QPS 50 / burst 100 with unthrottled; the script's default is kqueue's own.
$PY bench/e2e_jobs.py --jobs 20 --qps 50 --burst 100 --out bench/results/e2e_jobs.json \
    --plot docs/img/e2e_jobs_admission.png
$PY bench/e2e_jobs.py --jobs 20 --qps 0 --out bench/results/e2e_jobs_unthrottled.json \
    --plot docs/img/e2e_jobs_admission_unthrottled.png
$PY bench/memory.py --out bench/results/memory.json
# Section 9: accuracy of predicted start times (about 7 CPU minutes).
$PY bench/eta_accuracy.py --scale 0.1 --out bench/results/eta_accuracy.json \
    --plot docs/img/eta_accuracy.png
# MultiKueue: a manager, 10 workers, 50 Jobs (docs/benchmarks.md section 12: 1,000 did not finish here).
nice $PY bench/multikueue_scale.py --workers 10 --workloads 50 --timeout 1500 \
    --out bench/results/multikueue_scale_w10_n50.json
$PY bench/plots.py
for n in x0.2_qps50 x0.2_unthrottled full_unthrottled; do
    if [ -f bench/results/profile_e2e_$n.txt ]; then
        $PY bench/profile_summary.py bench/results/profile_e2e_$n.txt \
            > bench/results/profile_e2e_$n.summary.txt
    fi
done
