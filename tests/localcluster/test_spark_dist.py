"""The spark-submit the Spark operator runs: its kubeconfig, script and start, without Maven or
a cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kqueue.localcluster import build, operators, spark_dist


def _kubeconfig(tmp_path: Path) -> Path:
    key = ec.generate_private_key(ec.SECP256R1())
    key_path = tmp_path / "client.key"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "op", "user": {"client-certificate": "/x.crt", "client-key": str(key_path)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "op"}}],
        "current-context": "local",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_client_key_is_rewritten_in_sec1_form(tmp_path: Path) -> None:
    source = _kubeconfig(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = spark_dist.sec1_kubeconfig(source, out_dir)
    user = yaml.safe_load(out.read_text())["users"][0]["user"]
    pem = Path(user["client-key"]).read_text()
    # fabric8 takes "PRIVATE KEY" (PKCS#8) for RSA; "EC PRIVATE KEY" it reads as EC.
    assert pem.startswith("-----BEGIN EC PRIVATE KEY-----")
    assert Path(user["client-key"]).stat().st_mode & 0o077 == 0
    original = serialization.load_pem_private_key(Path(tmp_path / "client.key").read_bytes(), password=None)
    rewritten = serialization.load_pem_private_key(pem.encode(), password=None)
    assert original.private_numbers() == rewritten.private_numbers()  # type: ignore[union-attr]
    assert user["client-certificate"] == "/x.crt"


def test_the_script_runs_spark_submit_on_the_jars_with_spark_s_module_options() -> None:
    script = spark_dist.spark_submit_script()
    assert script.startswith("#!/bin/sh\n")
    assert '-cp "$SPARK_HOME/jars/*" org.apache.spark.deploy.SparkSubmit "$@"' in script
    assert "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" in script


def test_the_operator_runs_with_the_distribution_and_the_sec1_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "spark-home"
    monkeypatch.setattr(spark_dist, "ensure", lambda: home)
    ctx = operators.RunContext(
        binary=tmp_path / "spark-operator",
        work_dir=tmp_path,
        kubeconfig=_kubeconfig(tmp_path),
        health_port=1,
        webhook_port=2,
        cert_dir=tmp_path,
    )
    args, env = operators.get("spark-operator").command(ctx)
    assert args[:2] == ["controller", "start"]
    assert env["SPARK_HOME"] == str(home)
    assert env["PATH"].split(":")[0] == str(home / "bin")
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "6443")
    user = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())["users"][0]["user"]
    assert Path(user["client-key"]).read_text().startswith("-----BEGIN EC PRIVATE KEY-----")


def test_a_missing_maven_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    with pytest.raises(spark_dist.SparkDistError, match="`mvn` \\(Maven\\) is not on PATH"):
        spark_dist._mvn()


def test_the_distribution_is_built_with_the_operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built at the end of collection with the binary (outside the tests' timeouts): an
    operator whose distribution is missing is not built yet."""
    op = operators.get("spark-operator")
    made: list[str] = []
    monkeypatch.setattr(build, "stamp_ok", lambda _component, _dir: True)
    monkeypatch.setattr(build, "ensure_component", lambda _component, **_options: tmp_path)

    def assemble() -> Path:
        made.append("spark")
        return tmp_path

    op = dataclasses.replace(op, assets=(lambda: bool(made), assemble))
    assert operators.built(op) is None
    assert operators.ensure_built(op) == tmp_path / "spark-operator"
    assert made == ["spark"]
    assert operators.built(op) is not None
    # Its failure is a build failure: the tests needing the operator fail with it.
    assert issubclass(spark_dist.SparkDistError, build.BuildError)
    assert operators.get("spark-operator").assets is not None
