"""The Job webhook follows the Configuration's ElasticJobsViaWorkloadSlices gate as Kueue's does
(``workloadslicing.Enabled``: the annotation counts only with the gate on).

Ported from Kueue's pkg/controller/jobs/job/job_webhook_test.go (``TestValidateCreate``) and
pkg/controller/jobframework/validation_test.go (``TestValidateJobOnUpdate``,
``TestValidateJobOnCreate``): each case is named ``<Kueue test>/<Kueue case>``; the cases
without a Kueue name are kqueue's own counterpart with the gate switched the other way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.api.config import Configuration
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.framework import WebhookContext
from kqueue.controller.integrations.job import FRAMEWORK
from kqueue.controller.integrations.job.webhook import JobWebhooks
from kqueue.controller.resources import JOBS
from kqueue.controller.webhooks import identities
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_job_webhook import ELASTIC, ELASTIC_PATH, MIN, MIN_PATH, _job, _request

Obj = dict[str, Any]

REQUIRED_PATH = f"spec.template.metadata.annotations[{c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION}]"
PREFERRED_PATH = f"spec.template.metadata.annotations[{c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION}]"


def _with_template(job: Obj, annotations: dict[str, str]) -> Obj:
    job["spec"]["template"].setdefault("metadata", {})["annotations"] = dict(annotations)
    return job


def _partial_elastic() -> Obj:
    job = _job({MIN: "2", ELASTIC: "true"}, parallelism=4)
    job["spec"]["completions"] = 6
    return job


@dataclass(frozen=True)
class Case:
    new: Obj
    old: Obj | None = None
    gates: dict[str, bool] = field(default_factory=dict)
    # field -> a piece of the message; empty: accepted
    want: dict[str, str] = field(default_factory=dict)


ON = {"ElasticJobsViaWorkloadSlices": True}
OFF = {"ElasticJobsViaWorkloadSlices": False}

CASES: dict[str, Case] = {
    "TestValidateCreate/partial admission and elastic job cannot be used together": Case(
        new=_partial_elastic(), gates=ON, want={MIN_PATH: "cannot be combined with an elastic job"}
    ),
    "partial admission and an elastic annotation, the gate off: accepted": Case(
        new=_partial_elastic(), gates=OFF
    ),
    "TestValidateCreate/elastic job with required topology is rejected": Case(
        new=_with_template(
            _job({ELASTIC: "true"}), {c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}
        ),
        gates={"TopologyAwareScheduling": True, **ON},
        want={REQUIRED_PATH: "required topology is not supported with elastic jobs"},
    ),
    "TestValidateCreate/elastic job with preferred topology is rejected": Case(
        new=_with_template(
            _job({ELASTIC: "true"}), {c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}
        ),
        gates={"TopologyAwareScheduling": True, **ON},
        want={PREFERRED_PATH: "preferred topology is not supported with elastic jobs"},
    ),
    "TestValidateCreate/elastic job with unconstrained topology is accepted": Case(
        new=_with_template(
            _job({ELASTIC: "true"}), {c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true"}
        ),
        gates={"TopologyAwareScheduling": True, **ON},
    ),
    "elastic job with required topology, the gate off: accepted (not elastic)": Case(
        new=_with_template(
            _job({ELASTIC: "true"}), {c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}
        ),
        gates=OFF,
    ),
    "TestValidateJobOnUpdate/elastic job enabled annotation cannot be removed on update": Case(
        new=_job({}), old=_job({ELASTIC: "true"}), gates=ON, want={ELASTIC_PATH: "immutable"}
    ),
    "TestValidateJobOnUpdate/elastic job enabled annotation cannot be added on update": Case(
        new=_job({ELASTIC: "true"}), old=_job({}), gates=ON, want={ELASTIC_PATH: "immutable"}
    ),
    "elastic job enabled annotation removed on update, the gate off: accepted": Case(
        new=_job({}), old=_job({ELASTIC: "true"}), gates=OFF
    ),
    "elastic job enabled annotation added on update, the gate off: accepted": Case(
        new=_job({ELASTIC: "true"}), old=_job({}), gates=OFF
    ),
    "TestValidateJobOnCreate/elastic annotation on batch/v1.Job is allowed": Case(
        new=_job({ELASTIC: "true"}), gates=ON
    ),
    "TestValidateJobOnCreate/elastic annotation without feature gate is ignored": Case(
        new=_job({ELASTIC: "true"}), gates=OFF
    ),
}


def _hooks(gates: dict[str, bool]) -> JobWebhooks:
    # As the controller builds them from its Configuration.
    [hook] = [h for h in FRAMEWORK.webhooks if h.type == "validating"]
    handler = hook.handler(WebhookContext(config=Configuration(feature_gates=gates)))
    owner = getattr(handler, "__self__", None)
    assert isinstance(owner, JobWebhooks)
    return owner


@pytest.mark.parametrize("name", list(CASES))
async def test_elastic_job_validation_follows_the_gate(name: str) -> None:
    case = CASES[name]
    verdict = await _hooks(case.gates).validate(_request(case.new, case.old))
    got = {e.field: e.message for e in verdict.errors}
    assert set(got) == set(case.want), got
    for path, piece in case.want.items():
        assert piece in got[path]
    assert verdict.allowed == (not case.want)


async def test_with_the_gate_off_an_elastic_annotation_is_accepted_with_a_warning() -> None:
    verdict = await JobWebhooks(slices=False).validate(_request(_job({ELASTIC: "true"}), None))
    assert verdict.allowed
    [warning] = [w for w in verdict.warnings if ELASTIC in w]
    assert "ElasticJobsViaWorkloadSlices is false" in warning
    # With the gate on the same Job is elastic: no such warning.
    on = await JobWebhooks(slices=True).validate(_request(_job({ELASTIC: "true"}), None))
    assert not [w for w in on.warnings if ELASTIC in w]


@pytest.mark.parametrize(
    ("slices", "want_epoch"), [(True, "g4"), (False, None)], ids=["gate-on", "gate-off"]
)
async def test_an_annotated_job_s_pods_name_a_group_per_size_only_with_the_gate_on(
    cluster: FakeCluster, slices: bool, want_epoch: str | None
) -> None:
    # The pod webhook's size epoch (one PodGroup per size of a resizable object): a Job
    # annotated elastic does not resize with the gate off, so its pods name one group.
    job = _job({ELASTIC: "true"})
    job["metadata"].update(uid="u1", generation=4)
    cluster.server.add(JOBS, job)
    config = Configuration(feature_gates={"ElasticJobsViaWorkloadSlices": slices})
    identity = identities({"batch/job"}, cluster.kube, config=config)
    assert await identity("Job", "ns", "j", "u1") == ("u1", want_epoch)
