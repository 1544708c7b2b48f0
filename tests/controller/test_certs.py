"""Webhook certificates: generation, renewal decisions, the cert dir, and the in-cluster rotator."""

from __future__ import annotations

import base64
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from kubernetes_asyncio.client import ApiClient

from kqueue.controller.resources import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
)
from kqueue.controller.webhook_server.certs import (
    CertBundle,
    CertRotator,
    ensure_local_certs,
    generate_bundle,
    read_cert_dir,
    renewal_reason,
    service_hosts,
    write_cert_dir,
)
from tests.controller.fake_apiserver import FakeApiServer, start_app

NOW = datetime(2026, 3, 1, tzinfo=UTC)
HOSTS = service_hosts("kqueue-webhook-service", "kqueue-system")


def test_service_hosts() -> None:
    assert HOSTS == [
        "kqueue-webhook-service",
        "kqueue-webhook-service.kqueue-system",
        "kqueue-webhook-service.kqueue-system.svc",
        "kqueue-webhook-service.kqueue-system.svc.cluster.local",
    ]


def test_a_generated_bundle_serves_the_hosts_and_chains_to_its_ca() -> None:
    bundle = generate_bundle([*HOSTS, "127.0.0.1"], now=NOW)
    cert = bundle.certificate
    assert sorted(bundle.hosts()) == sorted([*HOSTS, "127.0.0.1"])
    cert.verify_directly_issued_by(bundle.ca_certificates[0])
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert (
        bundle.ca_certificates[0].extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    )
    assert renewal_reason(bundle, HOSTS, now=NOW) is None


@pytest.mark.parametrize(
    ("change", "want"),
    [
        ("expiring", "certificate expires"),
        ("other hosts", "does not cover"),
        ("other key", "key does not match"),
        ("other ca", "not signed by the CA"),
        ("garbage", "unreadable"),
    ],
)
def test_renewal_reasons(change: str, want: str) -> None:
    bundle = generate_bundle(HOSTS, now=NOW, valid_for=timedelta(days=90))
    other = generate_bundle(["elsewhere"], now=NOW)
    now = NOW
    hosts = HOSTS
    if change == "expiring":
        now = NOW + timedelta(days=70)  # within the 30 days before expiry
    elif change == "other hosts":
        hosts = [*HOSTS, "kqueue-webhook-service.other.svc"]
    elif change == "other key":
        bundle = CertBundle(bundle.ca_pem, bundle.cert_pem, other.key_pem)
    elif change == "other ca":
        bundle = CertBundle(other.ca_pem, bundle.cert_pem, bundle.key_pem)
    elif change == "garbage":
        bundle = CertBundle(b"nope", b"nope", b"nope")
    reason = renewal_reason(bundle, hosts, now=now)
    assert reason is not None and want in reason


def test_renewal_keeps_a_valid_ca_and_rotates_an_expiring_one_with_an_overlap() -> None:
    first = generate_bundle(HOSTS, now=NOW, ca_valid_for=timedelta(days=400))
    renewed = generate_bundle(HOSTS, now=NOW + timedelta(days=100), previous=first)
    assert renewed.ca_pem == first.ca_pem
    assert renewed.cert_pem != first.cert_pem
    # Near the CA's end a new CA signs the certificate, and the old one stays trusted.
    rotated = generate_bundle(HOSTS, now=NOW + timedelta(days=390), previous=renewed)
    cas = rotated.ca_certificates
    assert len(cas) == 2
    assert cas[1] == first.ca_certificates[0]
    rotated.certificate.verify_directly_issued_by(cas[0])
    assert renewal_reason(rotated, HOSTS, now=NOW + timedelta(days=390)) is None


def test_the_serving_certificate_never_outlives_its_ca() -> None:
    bundle = generate_bundle(HOSTS, now=NOW, ca_valid_for=timedelta(days=60))
    assert bundle.not_after <= bundle.ca_certificates[0].not_valid_after_utc


def test_cert_dir_is_written_atomically_with_a_private_key(tmp_path: Path) -> None:
    bundle = generate_bundle(["127.0.0.1"], now=NOW)
    assert write_cert_dir(tmp_path / "certs", bundle)
    assert not write_cert_dir(tmp_path / "certs", bundle)  # unchanged: nothing rewritten
    assert stat.S_IMODE((tmp_path / "certs" / "tls.key").stat().st_mode) == 0o600
    assert read_cert_dir(tmp_path / "certs") == CertBundle(
        bundle.ca_pem, bundle.cert_pem, bundle.key_pem
    )
    assert not [p for p in (tmp_path / "certs").iterdir() if p.name.startswith(".")]
    assert read_cert_dir(tmp_path / "missing") is None


def test_local_certs_are_reused_until_they_need_renewal(tmp_path: Path) -> None:
    first = ensure_local_certs(tmp_path, now=NOW)
    assert sorted(first.hosts()) == ["127.0.0.1", "localhost"]
    assert ensure_local_certs(tmp_path, now=NOW + timedelta(days=10)).cert_pem == first.cert_pem
    later = ensure_local_certs(tmp_path, now=NOW + timedelta(days=340))
    assert later.cert_pem != first.cert_pem
    assert later.ca_pem == first.ca_pem  # the CA is still good for years
    assert (tmp_path / "tls.crt").read_bytes() == later.cert_pem


SECRET = "/api/v1/namespaces/kqueue-system/secrets/kqueue-webhook-server-cert"


@dataclass
class Env:
    api: FakeApiServer
    server: TestServer
    client: ApiClient

    def secret(self) -> dict[str, Any]:
        secret = self.api.get(SECRETS, "kqueue-webhook-server-cert", "kqueue-system")
        assert secret is not None, "no Secret kqueue-system/kqueue-webhook-server-cert"
        return secret

    def webhook_configurations(self) -> list[dict[str, Any]]:
        return [
            *self.api.objects(MUTATING_WEBHOOK_CONFIGURATIONS),
            *self.api.objects(VALIDATING_WEBHOOK_CONFIGURATIONS),
        ]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    api = FakeApiServer()
    server, (client,) = await start_app(api.app(), ["kqueue"])
    try:
        yield Env(api, server, client)
    finally:
        await client.close()
        await api.shutdown()
        await server.close()


def webhook_configuration(kind: str, name: str, hooks: int) -> dict[str, object]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": {"app": "kqueue"}},
        "webhooks": [
            {
                "name": f"hook{i}.kqueue.io",
                "clientConfig": {
                    "service": {"name": "kqueue-webhook-service", "namespace": "kqueue-system"}
                },
                "sideEffects": "None",
                "futureField": {"kept": True},
            }
            for i in range(hooks)
        ],
    }


def rotator(env: Env, cert_dir: Path) -> CertRotator:
    return CertRotator(
        env.client,
        namespace="kqueue-system",
        secret_name="kqueue-webhook-server-cert",
        service_name="kqueue-webhook-service",
        cert_dir=cert_dir,
        webhook_configurations=[
            ("MutatingWebhookConfiguration", "kqueue-mutating"),
            ("ValidatingWebhookConfiguration", "kqueue-validating"),
        ],
    )


async def test_rotator_creates_the_secret_writes_the_dir_and_injects_the_ca(
    env: Env, tmp_path: Path
) -> None:
    env.api.add(
        MUTATING_WEBHOOK_CONFIGURATIONS,
        webhook_configuration("MutatingWebhookConfiguration", "kqueue-mutating", 2),
    )
    env.api.add(
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        webhook_configuration("ValidatingWebhookConfiguration", "kqueue-validating", 1),
    )
    rot = rotator(env, tmp_path)
    assert not rot.check()[0]
    bundle = await rot.ensure(now=NOW)
    assert rot.check()[0]
    secret = env.secret()
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == bundle.cert_pem
    assert base64.b64decode(secret["data"]["ca.key"]) == bundle.ca_key_pem
    assert read_cert_dir(tmp_path) == CertBundle(bundle.ca_pem, bundle.cert_pem, bundle.key_pem)
    ca_b64 = base64.b64encode(bundle.ca_pem).decode()
    configs = env.webhook_configurations()
    assert len(configs) == 2
    for config in configs:
        assert all(w["clientConfig"]["caBundle"] == ca_b64 for w in config["webhooks"])
        # Everything else survives the write.
        assert all(w["futureField"] == {"kept": True} for w in config["webhooks"])
        assert config["metadata"]["labels"] == {"app": "kqueue"}
    # A second pass changes nothing.
    writes = len(env.api.writes)
    assert await rot.ensure(now=NOW + timedelta(days=1)) == bundle
    assert len(env.api.writes) == writes


async def test_a_second_replica_adopts_the_secret_and_renewal_replaces_it(
    env: Env, tmp_path: Path
) -> None:
    first = await rotator(env, tmp_path / "a").ensure(now=NOW)
    second = await rotator(env, tmp_path / "b").ensure(now=NOW + timedelta(hours=1))
    assert second == first
    assert (tmp_path / "b" / "tls.crt").read_bytes() == first.cert_pem
    renewed = await rotator(env, tmp_path / "a").ensure(now=NOW + timedelta(days=340))
    assert renewed.cert_pem != first.cert_pem
    assert renewed.ca_pem == first.ca_pem
    assert ("replace", SECRET) in env.api.writes


async def test_missing_webhook_configurations_are_not_fatal(env: Env, tmp_path: Path) -> None:
    bundle = await rotator(env, tmp_path).ensure(now=NOW)
    assert bundle.cert_pem == (tmp_path / "tls.crt").read_bytes()
