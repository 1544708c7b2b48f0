#!/usr/bin/env bash
# The end-to-end Workload benchmark, scaled (0.2) and full, with kqueue's client at QPS 50 /
# burst 100 (Kueue's benchmark settings) and unthrottled. Sequential: each starts its own cluster.
# The scaled runs profile the controller for their first 60 s, the full unthrottled run for 60 s
# from 120 s in (raw stacks; bench/profile_summary.py summarises them).
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
R=bench/results
$PY bench/e2e_workloads.py --scale 0.2 --qps 50 --burst 100 --profile 60 \
    --profile-out $R/profile_e2e_x0.2_qps50.txt --out $R/e2e_baseline_x0.2_qps50.json
$PY bench/e2e_workloads.py --scale 0.2 --qps 0 --profile 60 \
    --profile-out $R/profile_e2e_x0.2_unthrottled.txt --out $R/e2e_baseline_x0.2_unthrottled.json
$PY bench/e2e_workloads.py --scale 1 --qps 50 --burst 100 --timeout ${FULL_TIMEOUT:-900} \
    --out $R/e2e_baseline_qps50.json
$PY bench/e2e_workloads.py --scale 1 --qps 0 --timeout ${FULL_TIMEOUT:-900} \
    --profile 60 --profile-delay 120 --profile-out $R/profile_e2e_full_unthrottled.txt \
    --out $R/e2e_baseline_unthrottled.json
