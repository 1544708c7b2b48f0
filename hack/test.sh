#!/usr/bin/env bash
# `make test`: the whole suite (static checks, unit and property tests, the cluster tests on real
# control planes), in the shape that keeps a cold CI run short (docs/local-cluster.md, "CI"):
#   1. the Go builds start in the background (kqueue.localcluster.prebuild): the control plane
#      first at normal priority in two streams (Kubernetes; etcd, kwok), then helm and the
#      operators at a lower CPU priority (promtool's tests are opt-in: `make test-promtool`);
#   2. beside them, the tests that need no cluster run on KQUEUE_TEST_WORKERS pytest-xdist
#      workers at `nice -n 15`, below the builds of helm and the operators (so they never slow
#      the control plane's build, the cluster tests or the builds those wait for; output in
#      build/unit-tests.log, printed when they end);
#   3. once the control plane is built, the timing-bound cluster tests (marker `serial`: fault
#      tests with deadlines) run first on KQUEUE_SERIAL_TEST_WORKERS workers (default 2: they
#      mostly wait, a core each is enough), no other cluster test beside them: the CPU they
#      leave idle goes to helm's and the operators' builds and to the tests without a cluster,
#      all at a lower priority than theirs;
#   4. then the other cluster tests on KQUEUE_CLUSTER_TEST_WORKERS workers (default 2), each with
#      its own control plane (tests/fixtures/distribution.py says how the work is shared); the
#      tests that need an operator run last and wait for its build if it is not done
#      (tests/fixtures/operators.py), the chart tests for helm's (tests/fixtures/tools.py).
# Before all this, while pip makes the virtualenv, Kubernetes' build (the longest, stdlib-only
# Python) starts with the system Python: the prebuild then finds it under its lock.
# hack/test-phases.sh holds the marker expressions of the three pytest runs. Extra arguments go
# to every pytest run. The exit status is non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/test-phases.sh
. hack/test-phases.sh
VENV=${VENV:-.venv}
WORKERS=${KQUEUE_TEST_WORKERS:-2}
CLUSTER_WORKERS=${KQUEUE_CLUSTER_TEST_WORKERS:-2}
SERIAL_WORKERS=${KQUEUE_SERIAL_TEST_WORKERS:-2}
UNIT_NICE=15
mkdir -p build
started=$SECONDS

# Kubernetes' build needs no virtualenv: it starts now, and pip's install runs beside it.
"${PYTHON:-python3}" -m kqueue.localcluster.build --only kubernetes \
  >build/kubernetes-early.log 2>&1 &
echo "== Kubernetes' build started (log: build/kubernetes-early.log); making the virtualenv"
make --no-print-directory venv VENV="$VENV" || exit 1

# pytest's exit 5 means that the arguments selected no test of that run: not a failure here.
status() {
  local rc=$1 what=$2
  if [ "$rc" -eq 5 ]; then
    echo "== $what: no test selected" >&2
    rc=0
  fi
  echo "== $what: exit $rc after $(((SECONDS - started) / 60)) min"
  return "$rc"
}

"$VENV/bin/python" -m kqueue.localcluster.prebuild >build/prebuild.log 2>&1 &
prebuild=$!
echo "== builds started in the background (log: build/prebuild.log)"

echo "== tests without a cluster ($WORKERS workers, nice -n $UNIT_NICE), in the background" \
  "(log: build/unit-tests.log)"
nice -n "$UNIT_NICE" "$VENV/bin/pytest" -m "$UNIT_TESTS" -n "$WORKERS" "$@" \
  >build/unit-tests.log 2>&1 &
unit_tests=$!

# Each session waits for the control plane's builds (their locks) at the end of its collection.
# A failed build is not a reason to stop here: the cluster tests then fail, each naming it.
echo "== timing-bound cluster tests first ($SERIAL_WORKERS worker(s), no other cluster test" \
  "running; they start once the control plane is built)"
"$VENV/bin/pytest" -m "$CLUSTER_SERIAL" -n "$SERIAL_WORKERS" --durations=20 "$@"
status $? "timing-bound cluster tests"
serial=$?

echo "== cluster tests ($CLUSTER_WORKERS worker(s), one control plane each)"
"$VENV/bin/pytest" -m "$CLUSTER_PARALLEL" -n "$CLUSTER_WORKERS" --durations=40 "$@"
status $? "cluster tests"
cluster=$?

wait "$prebuild"
built=$?
tail -n 3 build/prebuild.log
echo "== builds: exit $built"

wait "$unit_tests"
rc=$?
echo "== tests without a cluster (build/unit-tests.log):"
cat build/unit-tests.log
status "$rc" "tests without a cluster"
unit=$?
echo "== whole run $(((SECONDS - started) / 60)) min"

for rc in "$unit" "$cluster" "$serial"; do
  [ "$rc" -eq 0 ] || exit "$rc"
done
