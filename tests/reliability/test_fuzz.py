"""Fuzzing the front doors: the manifest loader, ``kqueue convert`` and the admission webhooks.

Whatever comes in, the answer is a defined one:

* ``load_text`` returns objects or raises :class:`LoadError`, whose message starts with the
  source and the document index; never another exception.
* ``kqueue convert`` exits 0 or 2 (bad input, message naming the file), never 1 with a traceback.
* The webhook server (real TLS, real handlers) answers 200 with a well-formed AdmissionReview
  for the request's uid, or 400 for an envelope it cannot read; never 500, and never a denial
  caused by a handler failing (reason ``InternalError``).

Inputs are random YAML/JSON documents and random mutations of valid manifests and requests of
every kind (kqueue's, Kueue's v1beta1/v1beta2, Job, Pod, Namespace, PriorityClass). Each test runs
``KQUEUE_FUZZ_EXAMPLES`` examples (default below, chosen so the file takes well under a minute);
set it higher for a soak.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqueue.api.loader import LoadError, load_text
from kqueue.api.v1alpha1 import constants as c
from kqueue.cli.main import cli
from kqueue.controller.integrations.job import webhook as job_hooks
from kqueue.controller.webhook_server.certs import ensure_local_certs
from kqueue.controller.webhook_server.server import ADMISSION_API_VERSION
from kqueue.controller.webhooks import kinds as kinds_hooks
from kqueue.controller.webhooks import pod as pod_hooks
from tests.api import samples
from tests.reliability.webhook_thread import ThreadedWebhookServer

Obj = dict[str, Any]

EXAMPLES: Final = int(os.environ.get("KQUEUE_FUZZ_EXAMPLES", "0")) or None
SOURCE: Final = "fuzz/input.yaml"
KUEUE_SAMPLES: Final = Path(__file__).resolve().parents[1] / "api" / "kueue_samples"


def fuzz_settings(default: int) -> Any:
    return settings(
        max_examples=EXAMPLES or default,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much
        ],
        derandomize=EXAMPLES is None,  # the quick run is reproducible; a soak explores
        database=None,
    )


# --- seeds: one valid manifest of every kind the loader reads --------------------------------------


def _job() -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sample-job",
            "namespace": "team-a",
            "uid": "0b7c5f8e-1111-4e5e-9a4c-7a3a2f0f0009",
            "labels": {c.QUEUE_NAME_LABEL: "team-a", c.PRIORITY_CLASS_LABEL: "high"},
            "annotations": {c.JOB_MIN_PARALLELISM_ANNOTATION: "1"},
        },
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox",
                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                    ],
                }
            },
        },
    }


def _pod() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sample-pod",
            "namespace": "team-a",
            "uid": "0b7c5f8e-1111-4e5e-9a4c-7a3a2f0f0010",
            "labels": {c.QUEUE_NAME_LABEL: "team-a", c.MANAGED_LABEL: "true",
                       c.POD_GROUP_NAME_LABEL: "g", c.PREEMPTIBILITY_LABEL: "preemptible"},
            "annotations": {c.POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": {"cpu": "500m"}}}]},
    }


def _kueue_seeds() -> list[Obj]:
    out: list[Obj] = []
    for path in sorted(KUEUE_SAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict):
                out.extend(doc.get("items") or [doc])
    return out


KQUEUE_SEEDS: Final = [samples.load(kind) for kind in samples.ALL]
SEEDS: Final = [
    *KQUEUE_SEEDS,
    *_kueue_seeds(),
    _job(),
    _pod(),
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a",
                                                          "labels": {"team": "a"}}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
     "metadata": {"name": "high"}, "value": 1000, "globalDefault": False},
]


def test_seeds_cover_every_kind() -> None:
    kinds = {(d["apiVersion"].split("/")[0], d["kind"]) for d in SEEDS}
    for kind in ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue",
                 "WorkloadPriorityClass", "Workload"):
        assert ("kqueue.io", kind) in kinds
        assert ("kueue.x-k8s.io", kind) in kinds
    assert {("batch", "Job"), ("v1", "Pod"), ("v1", "Namespace")} <= kinds
    # Every seed is valid: mutations start from something the loader accepts.
    load_text(yaml.safe_dump_all(SEEDS), SOURCE)


# --- strategies --------------------------------------------------------------------------------------

# Values that sit on the edges of what the models accept.
NASTY: Final = [
    "-1", "lots", "1e999", "1.5.2", "", " ", "0", "-0", "1e-999", "1Ki", "99999999999999Ei",
    "Never", "None", "true", "yes", "null", "~", "a" * 300, "kqueue.io/x", "main", "cpu",
    "bad key!", "../..", "\x00", "é", "2024-13-45T99:99:99Z", "NaN",
    2**31, -(2**31) - 1, 2**63, -1, 0, 1.5, True, False, None, [], {},
]
KEYS: Final = [
    "apiVersion", "kind", "metadata", "name", "namespace", "labels", "annotations", "spec",
    "status", "items", "resourceGroups", "coveredResources", "flavors", "resources",
    "nominalQuota", "borrowingLimit", "lendingLimit", "cohortName", "cohort", "parentName",
    "podSets", "count", "minCount", "template", "containers", "requests", "priority",
    "priorityClassRef", "admission", "conditions", "queueName", "clusterQueue", "value",
    "nodeLabels", "tolerations", "preemption", "x-unknown",
]

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(NASTY),
)
values = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), kids, max_size=4),
    ),
    max_leaves=12,
)


def _slots(node: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) in ``node``: where a mutation can land."""
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((node, k))
            _slots(v, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append((node, i))
            _slots(v, out)
    return out


@st.composite
def mutated(draw: st.DrawFn, seeds: list[Obj]) -> Obj:
    """A valid manifest with one to four random edits: values replaced, removed, retyped or
    duplicated, and unknown keys added."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        slots = _slots(doc, [])
        if not slots:
            break
        parent, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["replace", "nasty", "delete", "add", "wrap", "duplicate"]))
        if op == "replace":
            parent[key] = draw(values)
        elif op == "nasty":
            parent[key] = draw(st.sampled_from(NASTY))
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS))] = draw(values)
        elif op == "wrap":
            parent[key] = [parent[key]] if draw(st.booleans()) else {"v": parent[key]}
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return doc


def _dump(docs: list[Any]) -> str:
    return yaml.safe_dump_all(docs, allow_unicode=True, sort_keys=False)


manifests = st.one_of(
    st.lists(mutated(SEEDS), min_size=1, max_size=3).map(_dump),
    st.lists(values, min_size=1, max_size=3).map(_dump),
    st.text(max_size=200),
    st.lists(st.sampled_from(["---\n", "kind: List\n", "items:\n", "- ", "  a: [\n", "{", "&a",
                              "*a\n", "!!python/object:os.system\n", "apiVersion: v1\n",
                              ": :\n", "\t", "key: 'x\n"]),
             max_size=10).map("".join),
)


# --- the loader -----------------------------------------------------------------------------------------


def _check_load(text: str) -> None:
    try:
        load_text(text, SOURCE)
    except LoadError as err:
        message = str(err)
        assert message.startswith(f"{SOURCE}: document "), message
        assert "Traceback" not in message


@fuzz_settings(200)
@given(text=manifests)
def test_loader_never_crashes_and_always_says_where(text: str) -> None:
    _check_load(text)


@fuzz_settings(150)
@given(doc=mutated(SEEDS))
def test_loader_on_mutated_manifests_of_every_kind(doc: Obj) -> None:
    _check_load(_dump([doc]))
    # The same object inside a List, as `kubectl get -o yaml` prints it.
    _check_load(_dump([{"apiVersion": "v1", "kind": "List", "items": [doc]}]))


def _with(doc: Obj, path: list[Any], value: Any) -> Obj:
    out = copy.deepcopy(doc)
    target: Any = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


KUEUE_POD: Final = next(d for d in SEEDS if d["kind"] == "Pod" and "kueue" in str(d["metadata"]))
KUEUE_JOB: Final = next(d for d in SEEDS if d["kind"] == "Job" and "kueue" in str(d["metadata"]))
KUEUE_FLAVOR: Final = next(d for d in SEEDS if d["apiVersion"].startswith("kueue.x-k8s.io/"))


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        # Crashes the fuzzer found in the Kueue import (AttributeError/TypeError before the fix).
        pytest.param(_with(KUEUE_JOB, ["metadata", "labels"], "-1"), "metadata.labels",
                     id="job-labels-string"),
        pytest.param(_with(KUEUE_POD, ["spec"], "-1"), "spec", id="pod-spec-string"),
        pytest.param(_with(KUEUE_POD, ["spec", "schedulingGates"], [{"name": []}]), None,
                     id="pod-gate-name-list"),
        pytest.param(_with(KUEUE_POD, ["spec", "schedulingGates"], 3), "spec.schedulingGates",
                     id="pod-gates-int"),
        pytest.param(_with(KUEUE_JOB, ["metadata", "annotations"], {1: "a"}),
                     "metadata.annotations", id="job-annotation-key-int"),
        pytest.param(_with(KUEUE_FLAVOR, ["metadata", "finalizers"], 7), "metadata.finalizers",
                     id="kueue-finalizers-int"),
        pytest.param(_with(KUEUE_FLAVOR, ["spec", "0[0"], None), "spec",
                     id="kueue-unknown-field-unspellable"),
        pytest.param(_with(KUEUE_JOB, ["spec", "template", "metadata"], "x"),
                     "spec.template.metadata", id="job-template-metadata-string"),
    ],
)
def test_kueue_import_names_the_misshapen_field(doc: Obj, path: str | None) -> None:
    text = _dump([doc])
    if path is None:
        load_text(text, SOURCE)  # a gate whose name is not a string is left for kube to judge
        return
    with pytest.raises(LoadError) as err:
        load_text(text, SOURCE)
    assert err.value.path is not None and err.value.path.startswith(path), err.value
    assert str(err.value).startswith(f"{SOURCE}: document 1 ("), str(err.value)


# --- the CLI --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    # hypothesis runs many examples per test call: a function-scoped tmp_path would be shared.
    with tempfile.TemporaryDirectory(prefix="kqueue-fuzz-") as d:
        yield Path(d)


@fuzz_settings(100)
@given(text=manifests, output=st.sampled_from(["yaml", "json"]))
def test_convert_exits_0_or_2_never_with_a_traceback(
    scratch: Path, text: str, output: str
) -> None:
    path = scratch / "input.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["convert", "-o", output, str(path)])
    assert result.exit_code in (0, 2), (
        f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    )
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert str(path) in result.output, result.output


# --- the webhooks -----------------------------------------------------------------------------------------

PATHS: Final = {
    job_hooks.MUTATE_PATH: "Job",
    job_hooks.VALIDATE_PATH: "Job",
    pod_hooks.MUTATE_PATH: "Pod",
    kinds_hooks.VALIDATE_PATH: "kqueue",
}
GVK: Final = {
    "Job": ({"group": "batch", "version": "v1", "kind": "Job"},
            {"group": "batch", "version": "v1", "resource": "jobs"}),
    "Pod": ({"group": "", "version": "v1", "kind": "Pod"},
            {"group": "", "version": "v1", "resource": "pods"}),
}


class WebhookClient:
    """A keep-alive HTTPS client for the webhook server, trusting its CA."""

    def __init__(self, port: int, ca_pem: bytes) -> None:
        self.port = port
        self.tls = ssl.create_default_context(cadata=ca_pem.decode())
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=self.tls, timeout=30)

    def post(self, path: str, body: bytes) -> tuple[int, Any]:
        for attempt in range(2):
            try:
                self.conn.request("POST", path, body, {"Content-Type": "application/json"})
                resp = self.conn.getresponse()
                return resp.status, json.loads(resp.read())
            except (http.client.HTTPException, ConnectionError):
                # The server may close an idle keep-alive connection: one retry on a new one.
                self.conn.close()
                self.conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.port, context=self.tls, timeout=30
                )
                if attempt:
                    raise
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookClient]:
    with tempfile.TemporaryDirectory(prefix="kqueue-fuzz-certs-") as d:
        bundle = ensure_local_certs(Path(d))
        server = ThreadedWebhookServer(Path(d))
        server.start()
        try:
            yield WebhookClient(server.port, bundle.ca_pem)
        finally:
            server.stop()


def _check_answer(status: int, answer: Any, uid: Any, sent_envelope_ok: bool) -> None:
    assert status in (200, 400), f"HTTP {status}: {answer}"
    if status == 400:
        assert not sent_envelope_ok, f"a well-formed review was refused: {answer}"
        assert answer["kind"] == "Status" and answer["code"] == 400, answer
        assert answer["message"].startswith("invalid AdmissionReview"), answer
        return
    assert answer["apiVersion"] == ADMISSION_API_VERSION and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        denial = response["status"]
        assert denial["reason"] != "InternalError", f"a handler failed: {denial['message']}"
        assert denial["message"] and denial["details"]["causes"], denial
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        assert isinstance(json.loads(base64.b64decode(response["patch"])), list)
    for warning in response.get("warnings", []):
        assert isinstance(warning, str)


def _request(kind: str, obj: Any, old: Any, operation: str) -> Obj:
    if kind == "kqueue":
        seed_kind = obj.get("kind") if isinstance(obj, dict) else None
        gvk = {"group": c.GROUP, "version": c.VERSION, "kind": str(seed_kind)}
        gvr = {"group": c.GROUP, "version": c.VERSION, "resource": "workloads"}
    else:
        gvk, gvr = GVK[kind]
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return {
        "uid": "fuzz-uid",
        "kind": gvk,
        "resource": gvr,
        "operation": operation,
        "namespace": "team-a",
        "name": name if isinstance(name, str) else None,
        "object": obj,
        "oldObject": old,
        "userInfo": {"username": "fuzzer"},
    }


def _seed_for(kind: str) -> list[Obj]:
    return {"Job": [_job()], "Pod": [_pod()], "kqueue": KQUEUE_SEEDS}[kind]


@st.composite
def valid_envelope_requests(draw: st.DrawFn) -> tuple[str, Obj]:
    """A well-formed AdmissionReview for a path, whose object is a mutated valid object."""
    path = draw(st.sampled_from(sorted(PATHS)))
    kind = PATHS[path]
    seeds = _seed_for(kind)
    operation = draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
    obj = draw(mutated(seeds))
    old = None
    if operation == "UPDATE":
        old = draw(st.one_of(st.sampled_from(seeds), mutated(seeds))).copy()
        if kind == "kqueue" and draw(st.booleans()):
            # An admitted Workload as the old object exercises the immutability rules.
            old = samples.load("Workload")
            obj = draw(mutated([old]))
    if draw(st.integers(0, 9)) == 0:
        obj = draw(values)  # not even an object
    req = _request(kind, obj, old, operation)
    if draw(st.booleans()):
        req["subResource"] = draw(st.sampled_from(["status", "scale"]))
    if not isinstance(obj, dict) and obj is not None:
        return path, {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
                      "request": req}
    return path, {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "request": req}


# Misshapen Jobs and Pods (metadata, labels or annotations that are not maps of strings, a spec or
# template that is not an object) cannot come from the API server's decoder but can reach the
# webhook port: the handlers refuse them naming the field (kqueue.controller.webhooks.shape), so
# the fuzzing below includes them.


@fuzz_settings(250)
@given(case=valid_envelope_requests())
def test_webhooks_answer_mutated_requests(
    webhook: WebhookClient, case: tuple[str, Obj]
) -> None:
    path, review = case
    obj = review["request"]["object"]
    well_formed = obj is None or isinstance(obj, dict)
    status, answer = webhook.post(path, json.dumps(review).encode())
    _check_answer(status, answer, "fuzz-uid", sent_envelope_ok=well_formed)


requests_anything = st.fixed_dictionaries(
    {},
    optional={
        "uid": st.one_of(st.text(max_size=8), values),
        "operation": st.one_of(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]),
                               values),
        "kind": st.one_of(st.sampled_from([g for g, _ in GVK.values()]), values),
        "resource": values,
        "object": st.one_of(mutated(SEEDS), values),
        "oldObject": st.one_of(mutated(SEEDS), values),
        "namespace": st.one_of(st.text(max_size=8), values),
        "name": st.one_of(st.text(max_size=8), values),
        "subResource": values,
        "dryRun": values,
        "userInfo": values,
    },
)
bodies = st.one_of(
    st.binary(max_size=64),
    values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "apiVersion": st.one_of(st.just(ADMISSION_API_VERSION), values),
            "kind": st.one_of(st.just("AdmissionReview"), values),
            "request": st.one_of(requests_anything, values),
        },
    ).map(lambda v: json.dumps(v).encode()),
)


@fuzz_settings(250)
@given(path=st.sampled_from(sorted(PATHS)), body=bodies)
def test_webhooks_answer_random_bodies(webhook: WebhookClient, path: str, body: bytes) -> None:
    uid = None
    try:
        review = json.loads(body)
        uid = review["request"]["uid"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        pass
    status, answer = webhook.post(path, body)
    # Whether the envelope was readable is the server's call; a 200 must echo the uid.
    _check_answer(status, answer, uid, sent_envelope_ok=False)


def _review(kind: str, obj: Obj) -> bytes:
    return json.dumps({"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
                       "request": _request(kind, obj, None, "CREATE")}).encode()


def test_no_http_500_on_a_job_whose_metadata_is_a_list(webhook: WebhookClient) -> None:
    job = _job()
    job["metadata"] = [job["metadata"]]
    status, _ = webhook.post(job_hooks.VALIDATE_PATH, _review("Job", job))
    assert status == 200


def test_a_pod_with_null_spec_is_refused_naming_the_field(webhook: WebhookClient) -> None:
    pod = _pod()
    pod["spec"] = None
    status, answer = webhook.post(pod_hooks.MUTATE_PATH, _review("Pod", pod))
    _check_answer(status, answer, "fuzz-uid", sent_envelope_ok=True)
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["details"]["causes"][0]["field"] == "spec"
