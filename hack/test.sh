#!/usr/bin/env bash
# `make test`: the whole suite (static checks, unit and property tests, then the cluster tests on
# real control planes), in the shape that keeps a cold CI run inside its budget
# (docs/local-cluster.md, "CI budget"):
#   1. the Go builds the cluster tests need start in the background (kqueue.localcluster.prebuild);
#   2. meanwhile the tests that need no cluster run on KQUEUE_TEST_WORKERS pytest-xdist workers;
#   3. once the builds are done, the cluster tests run on KQUEUE_CLUSTER_TEST_WORKERS workers
#      (default 1), each with its own control plane (tests/fixtures/distribution.py says how
#      the work is shared).
# Extra arguments go to both pytest runs. The exit status is non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
WORKERS=${KQUEUE_TEST_WORKERS:-2}
# The cluster tests run on one worker unless asked: on two workers (two control planes beside
# each other on two cores) a cold run took 59 min in all, but timing-bound tests
# (dropped connections, a lost MultiKueue worker) missed their deadlines (docs/local-cluster.md).
CLUSTER_WORKERS=${KQUEUE_CLUSTER_TEST_WORKERS:-1}
mkdir -p build
started=$SECONDS

"$VENV/bin/python" -m kqueue.localcluster.prebuild >build/prebuild.log 2>&1 &
prebuild=$!
echo "== builds for the cluster tests started in the background (log: build/prebuild.log)"

echo "== tests without a cluster ($WORKERS workers)"
"$VENV/bin/pytest" -m "not cluster" -n "$WORKERS" "$@"
unit=$?
echo "== tests without a cluster: exit $unit after $(((SECONDS - started) / 60)) min"

wait "$prebuild"
built=$?
tail -n 3 build/prebuild.log
echo "== builds: exit $built after $(((SECONDS - started) / 60)) min"

# A failed build is not a reason to stop here: the cluster tests then fail, each naming it.
echo "== cluster tests ($CLUSTER_WORKERS worker(s), one control plane each)"
"$VENV/bin/pytest" -m cluster -n "$CLUSTER_WORKERS" --durations=40 "$@"
cluster=$?
echo "== cluster tests: exit $cluster; whole run $(((SECONDS - started) / 60)) min"

for rc in "$unit" "$cluster"; do
  [ "$rc" -eq 0 ] || exit "$rc"
done
