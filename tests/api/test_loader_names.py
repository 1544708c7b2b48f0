"""The loader: generateName objects, Jobs as the controller sees them, migrate mode, and
Configuration documents."""

from __future__ import annotations

import re

import pytest
import yaml

from kqueue.api.loader import (
    GENERATED_NAME_ALPHABET,
    GeneratedNames,
    LoadError,
    load_text,
)

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels: {kqueue.io/queue-name: user-queue}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}
"""

SUFFIX = re.compile(f"^sample-job-[{GENERATED_NAME_ALPHABET}]{{5}}$")


def test_generate_name_gets_an_api_server_shaped_name() -> None:
    [obj] = load_text(JOB, "job.yaml").objects
    assert SUFFIX.match(obj.name), obj.name
    assert obj.raw["metadata"]["name"] == obj.name
    assert obj.raw["metadata"]["generateName"] == "sample-job-"
    assert obj.generate_name == "sample-job-"
    assert obj.ref == f"Job default/{obj.name}, generateName sample-job-"


def test_generated_names_are_reproducible() -> None:
    first = load_text(JOB, "job.yaml").objects[0].name
    again = load_text(JOB, "elsewhere.yaml").objects[0].name
    assert first == again


def test_the_same_manifest_twice_is_two_objects() -> None:
    names = GeneratedNames()
    a = load_text(JOB, "job.yaml", names=names).objects[0].name
    b = load_text(JOB, "job.yaml", names=names).objects[0].name
    in_one_file = [o.name for o in load_text(JOB + "---\n" + JOB, "jobs.yaml").objects]
    assert a != b
    assert in_one_file == [a, b]


def test_different_content_different_name() -> None:
    other = JOB.replace("user-queue", "other-queue")
    assert load_text(JOB).objects[0].name != load_text(other).objects[0].name


def test_long_generate_name_is_cut_as_the_api_server_does() -> None:
    long_job = JOB.replace("sample-job-", "x" * 70)
    [obj] = load_text(long_job).objects
    assert len(obj.name) == 63 and obj.name.startswith("x" * 58)


@pytest.mark.parametrize(
    ("metadata", "want"),
    [
        pytest.param(
            "{namespace: default}",
            "metadata.name: required (or metadata.generateName",
            id="neither name nor generateName",
        ),
        pytest.param(
            "{generateName: 7}",
            "metadata.generateName: must be a non-empty string, got 7",
            id="generateName not a string",
        ),
        pytest.param(
            '{name: "", generateName: j-}', "metadata.name: required", id="empty name"
        ),
    ],
)
def test_bad_names_say_where(metadata: str, want: str) -> None:
    text = f"apiVersion: batch/v1\nkind: Job\nmetadata: {metadata}\nspec: {{}}\n"
    with pytest.raises(LoadError) as err:
        load_text(text, "j.yaml")
    assert str(err.value).startswith("j.yaml: document 1 (Job): "), str(err.value)
    assert want in str(err.value)


def test_errors_after_naming_name_the_generated_object() -> None:
    text = JOB.replace("labels:", "annotations: {kueue.x-k8s.io/x: 1}\n  labels:").replace(
        "spec:\n", "spec: 3\n# "
    )
    with pytest.raises(LoadError) as err:
        load_text(text, "j.yaml")
    assert "generateName sample-job-)" in str(err.value)


KUEUE_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: j
  labels: {kueue.x-k8s.io/queue-name: user-queue, app: x}
spec:
  template: {spec: {schedulingGates: [{name: kueue.x-k8s.io/admission}], containers: []}}
"""


def test_jobs_keep_kueue_keys_as_the_controller_sees_them() -> None:
    [obj] = load_text(KUEUE_JOB).objects
    assert obj.raw["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "user-queue", "app": "x"}
    assert obj.warnings == ()


def test_migrate_renames_kueue_keys_and_keeps_other_kinds() -> None:
    other = (
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
        "metadata: {name: js, labels: {kueue.x-k8s.io/queue-name: q}}\n"
    )
    # Kueue's Configuration is the other kind of document read (converted, kueue_config.py).
    config = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nmultiKueue: {externalFrameworks: []}\n"
    result = load_text(KUEUE_JOB + "---\n" + other + "---\n" + config, migrate=True)
    job, jobset, converted = result.objects
    assert converted.config is not None and converted.raw["apiVersion"] == "config.kqueue.io/v1alpha1"
    assert converted.warnings == (
        "multiKueue.externalFrameworks: not supported by kqueue; ignored (from "
        "config.kueue.x-k8s.io/v1beta1)",
    )
    assert list(job.raw["metadata"]["labels"]) == ["kqueue.io/queue-name", "app"]
    assert job.raw["spec"]["template"]["spec"]["schedulingGates"] == [
        {"name": "kqueue.io/admission"}
    ]
    assert jobset.raw["metadata"]["labels"] == {"kqueue.io/queue-name": "q"}
    assert result.skipped == []


def test_configuration_document() -> None:
    text = yaml.safe_dump(
        {
            "apiVersion": "config.kqueue.io/v1alpha1",
            "kind": "Configuration",
            "manageJobsWithoutQueueName": True,
        }
    )
    [obj] = load_text(text, "c.yaml").objects
    assert obj.config is not None and obj.config.manage_jobs_without_queue_name
    with pytest.raises(LoadError) as err:
        load_text(text.replace("true", "maybe"), "c.yaml")
    assert str(err.value).startswith("c.yaml: document 1 (Configuration): manageJobsWithoutQueueName")
