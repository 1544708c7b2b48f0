# The pytest runs of `make test` (hack/test.sh), as marker expressions; sourced by hack/test.sh
# and read by tests/localcluster/test_build_schedule.py, which checks that every combination of
# markers falls in exactly one of them (no test run twice, none lost).
# - the tests without a cluster, beside the builds (at a lower CPU priority);
UNIT_TESTS='not cluster'
# - the cluster tests on KQUEUE_CLUSTER_TEST_WORKERS workers, from when the control plane is built;
CLUSTER_PARALLEL='cluster and not serial'
# - then the timing-bound cluster tests (marker `serial`), on KQUEUE_SERIAL_TEST_WORKERS workers
#   (default 2), once the builds and the other tests are done, with the machine to themselves.
CLUSTER_SERIAL='cluster and serial'
