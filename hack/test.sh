#!/usr/bin/env bash
# `make test`: the whole suite (static checks, unit and property tests, the cluster tests on real
# control planes), in the shape that keeps a cold CI run short (docs/local-cluster.md, "CI"):
#   1. the Go builds start in the background (kqueue.localcluster.prebuild): Kubernetes in one
#      stream; etcd, kwok, helm, promtool, then the operators (at a lower CPU priority) in another;
#   2. beside them, the tests that need no cluster run on KQUEUE_TEST_WORKERS pytest-xdist
#      workers (their output in build/unit-tests.log, printed when they end);
#   3. and the cluster tests run on KQUEUE_CLUSTER_TEST_WORKERS workers (default 1), each with its
#      own control plane (tests/fixtures/distribution.py says how the work is shared): they start
#      as soon as the control plane is built, not after every build; the tests that need an
#      operator run last and wait for its build (tests/fixtures/operators.py).
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
echo "== builds started in the background (log: build/prebuild.log)"

echo "== tests without a cluster ($WORKERS workers), in the background (log: build/unit-tests.log)"
"$VENV/bin/pytest" -m "not cluster" -n "$WORKERS" "$@" >build/unit-tests.log 2>&1 &
unit_tests=$!

# The session waits for the control plane's builds (their locks) at the end of its collection.
# A failed build is not a reason to stop here: the cluster tests then fail, each naming it.
echo "== cluster tests ($CLUSTER_WORKERS worker(s), one control plane each; they start once" \
  "the control plane is built)"
"$VENV/bin/pytest" -m cluster -n "$CLUSTER_WORKERS" --durations=40 "$@"
cluster=$?
echo "== cluster tests: exit $cluster after $(((SECONDS - started) / 60)) min"

wait "$unit_tests"
unit=$?
echo "== tests without a cluster (build/unit-tests.log):"
cat build/unit-tests.log
echo "== tests without a cluster: exit $unit"

wait "$prebuild"
built=$?
tail -n 3 build/prebuild.log
echo "== builds: exit $built; whole run $(((SECONDS - started) / 60)) min"

for rc in "$unit" "$cluster"; do
  [ "$rc" -eq 0 ] || exit "$rc"
done
