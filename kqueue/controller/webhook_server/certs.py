"""Serving certificates for the admission webhook server.

Two ways to get them, chosen by ``internalCertManagement.enable``:

* **internal** (:class:`CertRotator`): kqueue keeps a self-signed CA and a serving certificate
  for the webhook Service's DNS names in a Secret (the one source of truth shared by all
  replicas), renews them well before they expire, writes them to ``certDir`` and injects the CA
  into the named Mutating/ValidatingWebhookConfigurations, like Kueue's cert-controller;
* **external** (cert-manager or any other tool writing ``certDir``): the server watches the
  files and reloads them when they change (see ``WebhookServer.watch_certs``).

For development without a cluster, :func:`ensure_local_certs` issues a certificate for
``127.0.0.1``/``localhost``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from kubernetes_asyncio.client import ApiClient

from kqueue import pki
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.resources import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Resource,
)

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
# Renew this long before expiry: long enough for every replica (and the kubelet's Secret volume
# sync, when certDir is a mounted Secret) to pick the new certificate up.
RENEW_BEFORE = timedelta(days=30)
# Certificates start a little in the past so a peer whose clock lags still accepts them.
_BACKDATE = timedelta(minutes=5)


class CertError(Exception):
    """Certificates that cannot be used, with the reason."""


@dataclass(frozen=True)
class CertBundle:
    """A CA and a serving certificate it signed, in PEM.

    ``ca_pem`` may hold several CA certificates: during a CA rotation the new CA comes first and
    the previous one stays trusted until it expires, so replicas still serving the old
    certificate keep working. ``ca_key_pem`` (of the first CA) is only known to the internal
    manager, never written to ``certDir``.
    """

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    ca_key_pem: bytes = b""

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def ca_certificates(self) -> list[x509.Certificate]:
        return x509.load_pem_x509_certificates(self.ca_pem)

    @property
    def not_after(self) -> datetime:
        return self.certificate.not_valid_after_utc

    def hosts(self) -> list[str]:
        """The DNS names and IP addresses the serving certificate is valid for."""
        try:
            san = self.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            return []
        names = [str(n) for n in san.value.get_values_for_type(x509.DNSName)]
        ips = [str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)]
        return names + ips


def service_hosts(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """The names the API server may use for a Service: ``svc``, ``svc.ns``, ``svc.ns.svc``..."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
    ]


def generate_ca(
    *,
    common_name: str = "kqueue-webhook-ca",
    valid_for: timedelta = CA_VALIDITY,
    now: datetime | None = None,
) -> tuple[bytes, bytes]:
    """A self-signed CA: ``(cert_pem, key_pem)``."""
    now = now or datetime.now(UTC)
    key, cert = pki.make_ca(common_name, not_before=now - _BACKDATE, not_after=now + valid_for)
    return pki.cert_pem(cert), pki.key_pem(key)


def issue_serving_cert(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    hosts: Sequence[str],
    *,
    valid_for: timedelta = SERVING_VALIDITY,
    now: datetime | None = None,
) -> tuple[bytes, bytes]:
    """A serving certificate for ``hosts`` (DNS names or IP addresses): ``(cert_pem, key_pem)``."""
    if not hosts:
        raise CertError("a serving certificate needs at least one host")
    now = now or datetime.now(UTC)
    ca_cert = x509.load_pem_x509_certificates(ca_cert_pem)[0]
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise CertError("the CA key is not an EC key")
    key, cert = pki.issue(
        ca_key,
        ca_cert,
        common_name=hosts[0],
        hosts=hosts,
        server=True,
        not_before=now - _BACKDATE,
        not_after=now + valid_for,
    )
    return pki.cert_pem(cert), pki.key_pem(key)


def generate_bundle(
    hosts: Sequence[str],
    *,
    now: datetime | None = None,
    previous: CertBundle | None = None,
    ca_valid_for: timedelta = CA_VALIDITY,
    valid_for: timedelta = SERVING_VALIDITY,
    renew_before: timedelta = RENEW_BEFORE,
) -> CertBundle:
    """A serving certificate for ``hosts``, reusing ``previous``'s CA while it stays valid.

    A new CA is made only when there is none or it expires within ``renew_before``; the old
    CA then stays in the bundle (until it expires) so the API server keeps trusting replicas
    that have not reloaded yet.
    """
    now = now or datetime.now(UTC)
    ca_pem, ca_key_pem, old_cas = b"", b"", b""
    if previous is not None and previous.ca_key_pem:
        try:
            first_ca = previous.ca_certificates[0]
            if first_ca.not_valid_after_utc - renew_before > now:
                ca_pem = first_ca.public_bytes(serialization.Encoding.PEM)
                ca_key_pem = previous.ca_key_pem
            else:
                old_cas = b"".join(
                    c.public_bytes(serialization.Encoding.PEM)
                    for c in previous.ca_certificates
                    if c.not_valid_after_utc > now
                )
        except ValueError:
            pass
    if not ca_pem:
        ca_pem, ca_key_pem = generate_ca(valid_for=ca_valid_for, now=now)
    cert_pem, key_pem = issue_serving_cert(ca_pem, ca_key_pem, hosts, valid_for=valid_for, now=now)
    return CertBundle(
        ca_pem=ca_pem + old_cas, cert_pem=cert_pem, key_pem=key_pem, ca_key_pem=ca_key_pem
    )


def renewal_reason(
    bundle: CertBundle | None,
    hosts: Sequence[str],
    *,
    now: datetime | None = None,
    renew_before: timedelta = RENEW_BEFORE,
) -> str | None:
    """Why ``bundle`` must be replaced (missing, unreadable, wrong hosts, expiring), or None."""
    if bundle is None:
        return "no certificate yet"
    now = now or datetime.now(UTC)
    try:
        cert = bundle.certificate
        cas = bundle.ca_certificates
        key = serialization.load_pem_private_key(bundle.key_pem, password=None)
    except ValueError as exc:
        return f"unreadable certificate or key: {exc}"
    if key.public_key() != cert.public_key():
        return "the key does not match the certificate"
    if not any(_signed_by(cert, ca) for ca in cas):
        return "the certificate is not signed by the CA"
    missing = sorted(set(hosts) - set(bundle.hosts()))
    if missing:
        return f"the certificate does not cover {', '.join(missing)}"
    if cert.not_valid_after_utc - renew_before <= now:
        return f"the certificate expires at {cert.not_valid_after_utc.isoformat()}"
    if cas[0].not_valid_after_utc - renew_before <= now:
        return f"the CA expires at {cas[0].not_valid_after_utc.isoformat()}"
    return None


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _write_atomic(path: Path, data: bytes, mode: int) -> bool:
    """Write ``data`` to ``path`` by rename (readers never see half a file); False if unchanged."""
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def write_cert_dir(cert_dir: Path, bundle: CertBundle) -> bool:
    """Write ``ca.crt``, ``tls.key`` and ``tls.crt``; returns whether anything changed.

    The key is written before the certificate so a reader that sees the new certificate also
    finds its key; the server checks that they match before switching anyway.
    """
    cert_dir.mkdir(parents=True, exist_ok=True)
    changed = _write_atomic(cert_dir / CA_CERT, bundle.ca_pem, 0o644)
    changed = _write_atomic(cert_dir / TLS_KEY, bundle.key_pem, 0o600) or changed
    changed = _write_atomic(cert_dir / TLS_CERT, bundle.cert_pem, 0o644) or changed
    return changed


def read_cert_dir(cert_dir: Path) -> CertBundle | None:
    """The certificates in ``cert_dir`` (the CA is optional there), or None if incomplete."""
    try:
        cert = (cert_dir / TLS_CERT).read_bytes()
        key = (cert_dir / TLS_KEY).read_bytes()
    except FileNotFoundError:
        return None
    try:
        ca = (cert_dir / CA_CERT).read_bytes()
    except FileNotFoundError:
        ca = cert
    return CertBundle(ca_pem=ca, cert_pem=cert, key_pem=key)


def ensure_local_certs(
    cert_dir: Path,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    *,
    now: datetime | None = None,
) -> CertBundle:
    """Development certificates in ``cert_dir``: reused while valid, otherwise regenerated."""
    existing = read_cert_dir(cert_dir)
    ca_key_path = cert_dir / CA_KEY
    if existing is not None and ca_key_path.exists():
        existing = CertBundle(
            existing.ca_pem, existing.cert_pem, existing.key_pem, ca_key_path.read_bytes()
        )
    reason = renewal_reason(existing, hosts, now=now)
    if reason is None and existing is not None:
        return existing
    logger.info("webhook certificates in %s: issuing new ones (%s)", cert_dir, reason)
    bundle = generate_bundle(hosts, now=now, previous=existing)
    write_cert_dir(cert_dir, bundle)
    _write_atomic(ca_key_path, bundle.ca_key_pem, 0o600)
    return bundle


# -- in-cluster management ------------------------------------------------------------------------

WebhookKind = Literal["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
_WEBHOOK_RESOURCES: dict[str, Resource] = {
    "MutatingWebhookConfiguration": MUTATING_WEBHOOK_CONFIGURATIONS,
    "ValidatingWebhookConfiguration": VALIDATING_WEBHOOK_CONFIGURATIONS,
}


class CertRotator:
    """Keeps the webhook certificates in a Secret valid, in ``cert_dir``, and trusted.

    Every replica runs it: the Secret's resourceVersion makes sure only one of several
    replicas racing to renew wins, and the others adopt the winner's certificates.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        namespace: str,
        secret_name: str,
        service_name: str,
        cert_dir: Path,
        webhook_configurations: Sequence[tuple[WebhookKind, str]] = (),
        renew_before: timedelta = RENEW_BEFORE,
        extra_hosts: Sequence[str] = (),
    ) -> None:
        # Every replica writes certificates, leader or not: its own client, with no write
        # deadline, on the shared connection pool.
        self._kube = Kube(api_client)
        self.namespace = namespace
        self.secret_name = secret_name
        self.hosts = [*service_hosts(service_name, namespace), *extra_hosts]
        self.cert_dir = cert_dir
        self.webhook_configurations = list(webhook_configurations)
        self.renew_before = renew_before
        self.bundle: CertBundle | None = None

    async def ensure(self, *, now: datetime | None = None) -> CertBundle:
        """One pass: renew if needed, write ``cert_dir``, inject the CA. Idempotent."""
        bundle = await self._ensure_secret(now=now)
        if write_cert_dir(self.cert_dir, bundle):
            logger.info(
                "webhook certificates written to %s (valid until %s)",
                self.cert_dir,
                bundle.not_after,
            )
        for kind, name in self.webhook_configurations:
            await self.inject_ca_bundle(kind, name, bundle.ca_pem)
        self.bundle = bundle
        return bundle

    async def run(self, *, interval: float = 60.0) -> None:
        """Call :meth:`ensure` every ``interval`` seconds (run it under a Supervisor)."""
        while True:
            await self.ensure()
            await asyncio.sleep(interval)

    def check(self) -> tuple[bool, str]:
        if self.bundle is None:
            return False, "webhook certificates not ready"
        return True, f"webhook certificate valid until {self.bundle.not_after.isoformat()}"

    async def _ensure_secret(self, *, now: datetime | None) -> CertBundle:
        what = f"Secret {self.namespace}/{self.secret_name}"
        for _ in range(5):
            secret: Obj | None
            try:
                secret = await self._kube.get(SECRETS, self.secret_name, self.namespace)
            except NotFound:
                secret = None
            except KubeError as exc:
                raise CertError(f"{what}: GET returned HTTP {exc.status}: {exc.message}") from exc
            current = _bundle_from_secret(secret) if secret is not None else None
            reason = renewal_reason(current, self.hosts, now=now, renew_before=self.renew_before)
            if reason is None and current is not None:
                return current
            logger.info("%s: issuing webhook certificates (%s)", what, reason)
            bundle = generate_bundle(
                self.hosts, now=now, previous=current, renew_before=self.renew_before
            )
            data = {
                CA_CERT: bundle.ca_pem,
                CA_KEY: bundle.ca_key_pem,
                TLS_CERT: bundle.cert_pem,
                TLS_KEY: bundle.key_pem,
            }
            body: Obj = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": self.secret_name, "namespace": self.namespace},
                "type": "kubernetes.io/tls",
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
            }
            try:
                if secret is not None:
                    # Keep labels, owners and the resourceVersion: a concurrent renewal makes
                    # ours 409.
                    body["metadata"] = secret["metadata"]
                    await self._kube.replace(SECRETS, body, namespace=self.namespace)
                else:
                    await self._kube.create(SECRETS, body, self.namespace)
            except Conflict:
                continue  # another replica renewed first: read again and adopt its certificates
            except KubeError as exc:
                raise CertError(
                    f"{what}: write returned HTTP {exc.status}: {exc.message}"
                ) from exc
            return bundle
        raise CertError(f"{what}: kept conflicting with concurrent writers")

    async def inject_ca_bundle(self, kind: WebhookKind, name: str, ca_pem: bytes) -> bool:
        """Set ``clientConfig.caBundle`` of every webhook in the named configuration.

        Returns whether it changed anything. A missing configuration is logged, not an error:
        it may be installed after the controller starts, and the next pass injects it.
        """
        resource = _WEBHOOK_RESOURCES[kind]
        ca_b64 = base64.b64encode(ca_pem).decode()
        for _ in range(5):
            try:
                config = await self._kube.get(resource, name)
            except NotFound:
                logger.warning("%s %s not found; cannot inject the webhook CA yet", kind, name)
                return False
            except KubeError as exc:
                raise CertError(
                    f"{kind} {name}: GET returned HTTP {exc.status}: {exc.message}"
                ) from exc
            webhooks = config.get("webhooks") or []
            stale = [w for w in webhooks if (w.get("clientConfig") or {}).get("caBundle") != ca_b64]
            if not stale:
                return False
            for w in stale:
                w.setdefault("clientConfig", {})["caBundle"] = ca_b64
            # The whole object goes back with its resourceVersion: nothing else is lost, and a
            # concurrent edit makes this write fail instead of being overwritten.
            try:
                await self._kube.replace(resource, config)
            except Conflict:
                continue
            except KubeError as exc:
                raise CertError(
                    f"{kind} {name}: PUT returned HTTP {exc.status}: {exc.message}"
                ) from exc
            logger.info("injected the webhook CA into %s %s (%d webhooks)", kind, name, len(stale))
            return True
        raise CertError(f"{kind} {name}: kept conflicting with concurrent writers")


def _bundle_from_secret(secret: Obj) -> CertBundle | None:
    data = secret.get("data") or {}
    try:
        decoded = {k: base64.b64decode(data[k]) for k in (CA_CERT, TLS_CERT, TLS_KEY)}
        ca_key = base64.b64decode(data.get(CA_KEY, ""))
    except (KeyError, ValueError):
        return None
    return CertBundle(decoded[CA_CERT], decoded[TLS_CERT], decoded[TLS_KEY], ca_key)
