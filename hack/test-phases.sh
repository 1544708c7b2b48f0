# The pytest runs of `make test` (hack/test.sh), as marker expressions; sourced by hack/test.sh
# and read by tests/localcluster/test_build_schedule.py, which checks that every combination of
# markers falls in exactly one of them (no test run twice, none lost).
# - the tests without a cluster, beside the builds (at a lower CPU priority);
UNIT_TESTS='not cluster'
# - the timing-bound cluster tests (marker `serial`), on KQUEUE_SERIAL_TEST_WORKERS workers
#   (default 2), first once the control plane is built, no other cluster test beside them (only
#   builds and the tests without a cluster, at a lower CPU priority);
CLUSTER_SERIAL='cluster and serial'
# - then the other cluster tests, on KQUEUE_CLUSTER_TEST_WORKERS workers.
CLUSTER_PARALLEL='cluster and not serial'
