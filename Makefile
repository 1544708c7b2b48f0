# kqueue developer targets. `make test` is the one command CI runs (.ci/run).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: venv test test-fast test-k136 test-operators test-extra-operators test-promtool lint crds chart-crds config-docs run run-multikueue bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# Everything: static checks, unit and property tests (two pytest-xdist workers, niced) and the
# cluster tests on real control planes (two workers), at once, beside the Go builds: the cluster
# tests start when the control plane is built; then the timing-bound cluster tests (marker
# `serial`) on two workers with the machine to themselves (hack/test.sh says how, and how to
# change the workers; hack/test-phases.sh holds the marker expressions).
# Plain `pytest` runs the same tests serially.
# hack/test.sh makes the virtualenv itself (`make venv`), once Kubernetes' build has started.
# (No $(MAKE) on the line: make would run it even under `make -n`.)
test:
	VENV=$(VENV) PYTHON=$(PYTHON) hack/test.sh

# Without the real control plane (quick inner loop).
test-fast: venv
	$(VENV)/bin/pytest -m "not cluster"

# The gang tests on Kubernetes v1.36.4 (scheduling.k8s.io/v1alpha2, one PodGroup per size of an
# elastic Job): builds v1.36.4 on first use (~28 min), so `make test` (cold CI) does not run it.
test-k136: venv
	KQUEUE_KUBERNETES_VERSION=v1.36.4 $(VENV)/bin/pytest -m cluster tests/gang_e2e

# The tests of the opt-in operators (MPI operator, KubeRay, LeaderWorkerSet, the training-operator,
# the AppWrapper and Spark operators),
# which `make test` deselects to keep a cold CI run in budget; built on first use
# (docs/local-cluster.md, "CI budget").
test-operators: venv
	KQUEUE_EXTRA_OPERATORS=only $(VENV)/bin/pytest -m cluster -n $${KQUEUE_TEST_WORKERS:-2}

test-extra-operators: test-operators

# The promtool checks of the alerts and the dashboard's queries (tests/monitoring/test_promtool.py,
# marker `promtool`), which `make test` deselects: building promtool cold costs ~577 CPU-s, more
# than a cold CI run inside 50 minutes can pay (docs/local-cluster.md, "CI"); built on first use.
test-promtool: venv
	KQUEUE_PROMTOOL=1 $(VENV)/bin/pytest -m promtool

lint: venv
	$(VENV)/bin/ruff check kqueue tests bench hack
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# A local control plane (built from Go modules on first use) with kqueue and sample queues.
# OPERATORS=jobset,trainer,mpi-operator also starts those operators (built on first use) before
# kqueue, and turns on the integrations they serve (printed).
# STOCK=1: every feature gate at its default (no PodGroup API), as most clusters run.
OPERATORS ?=
STOCK ?=
run: venv
	hack/run-local.sh $(if $(OPERATORS),--operators=$(OPERATORS)) $(if $(STOCK),--stock)

# MultiKueue (docs/multikueue.md): a manager and WORKERS worker control planes, each with its
# own kqueue, the workers' kubeconfigs as Secrets on the manager and sample queues on each;
# prints the kubectl contexts and a Job to submit on the manager.
WORKERS ?= 2
run-multikueue: venv
	hack/run-local.sh --multikueue-workers=$(WORKERS) $(if $(STOCK),--stock)

# Regenerate everything derived from the models: CRDs and API reference, the chart's copy of the
# CRDs, and the configuration reference. Tests fail when the committed files drift.
crds: venv
	$(VENV)/bin/kqueue generate crds --output-dir api
	hack/sync-chart-crds.sh

chart-crds:
	hack/sync-chart-crds.sh

# The configuration reference and the chart's schema of its `config` value, both from the
# Configuration model, and what the integration registry derives (chart RBAC, docs table):
# re-run after changing kqueue/api/config.py or an integration.
config-docs: venv
	$(PY) hack/gen-config-docs.py
	$(PY) hack/gen-integrations.py
	$(PY) hack/gen-chart-schema.py

# Benchmarks are not tests: they print their figures and write docs/benchmarks.md.
bench: venv
	bench/run_all.sh

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .pytest_cache
