"""A queue label on a kind whose integration is off, on the real control plane: a JobSet
labelled kqueue.io/queue-name while the JobSet integration is disabled (kqueue runs with the
default frameworks, batch/job and pod, and the real JobSet operator serves the kind). The user
is told at creation (an admission warning, which kubectl prints) and afterwards (a Warning event
on the JobSet), both naming the object, the label and integrations.frameworks; the JobSet is not
refused and kqueue leaves it alone (no Workload, not suspended)."""

from __future__ import annotations

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import WORKLOADS, Resource
from kqueue.controller.webhooks import framework_off
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, KqueueProcess, eventually, stays

pytestmark = pytest.mark.cluster

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")

JOBSET = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: labelled
  labels:
    kqueue.io/queue-name: user-queue
spec:
  replicatedJobs:
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 1
          completions: 1
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: main
                  image: registry.k8s.io/pause:3.10
                  resources:
                    requests: {cpu: 100m}
"""


async def test_a_queue_label_on_a_jobset_with_its_integration_off_is_reported(
    api: Api, kqueue: KqueueProcess, jobset_operator: str, cluster: LocalCluster, namespace: str
) -> None:
    assert "jobset.x-k8s.io/jobset" not in kqueue.config_yaml()
    res = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=JOBSET)
    # kubectl prints the admission warning on stderr: object, label, field to change.
    warning = res.stderr
    assert "Warning:" in warning, (res.stdout, res.stderr)
    for part in (
        f"JobSet {namespace}/labelled",
        f"{c.QUEUE_NAME_LABEL}=user-queue",
        "integrations.frameworks",
        '"jobset.x-k8s.io/jobset"',
    ):
        assert part in warning, (part, warning)

    async def event() -> dict[str, object] | None:
        for e in await api.events_for(namespace, "labelled"):
            if e.get("reason") == framework_off.REASON:
                return e
        return None

    found = await eventually(event, within=30, what="the IntegrationDisabled event on JobSet labelled")
    assert found["type"] == "Warning"
    assert found["involvedObject"]["kind"] == "JobSet"  # type: ignore[index]
    message = str(found["message"])
    assert f"{c.QUEUE_NAME_LABEL}=user-queue" in message and "integrations.frameworks" in message

    # Not refused, not queued: it runs as if kqueue were not there.
    js = await api.kube.get(JOBSETS, "labelled", namespace)
    # The event names the object by UID too (the validating webhook sees it), so `kubectl
    # describe` lists it.
    assert found["involvedObject"]["uid"] == js["metadata"]["uid"]  # type: ignore[index]
    assert not js["spec"].get("suspend")

    async def no_workload() -> bool:
        return not await api.kube.list(WORKLOADS, namespace=namespace)

    await stays(no_workload, for_s=3, what="no Workload for the JobSet")
    await api.kube.delete(JOBSETS, "labelled", namespace=namespace)
