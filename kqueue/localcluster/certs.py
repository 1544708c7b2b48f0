"""Certificates and keys for the local control plane.

One throwaway CA signs everything: the serving certificates (kube-apiserver, admission webhooks
served by tests), the admin client certificate (group ``system:masters``) and the client
certificates the other components use. The service-account key pair signs and verifies
service-account tokens. All of it lives in the cluster's temporary directory and dies with it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kqueue import pki

_VALIDITY = dt.timedelta(days=7)
_CLOCK_SKEW = dt.timedelta(minutes=5)


_key_pem = pki.key_pem
_cert_pem = pki.cert_pem


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


@dataclass(frozen=True)
class CertKey:
    """A certificate and its key, in PEM files."""

    cert_path: Path
    key_path: Path


@dataclass
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    cert_path: Path

    @classmethod
    def create(cls, directory: Path, common_name: str = "kqueue-local-ca") -> CertificateAuthority:
        now = dt.datetime.now(dt.UTC)
        key, cert = pki.make_ca(
            common_name, not_before=now - _CLOCK_SKEW, not_after=now + _VALIDITY
        )
        directory.mkdir(parents=True, exist_ok=True)
        cert_path = directory / "ca.crt"
        _write(cert_path, _cert_pem(cert))
        _write(directory / "ca.key", _key_pem(key), private=True)
        return cls(key=key, cert=cert, cert_path=cert_path)

    @property
    def pem(self) -> bytes:
        return _cert_pem(self.cert)

    def issue(
        self,
        directory: Path,
        name: str,
        *,
        common_name: str,
        organizations: tuple[str, ...] = (),
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
        server: bool = False,
        client: bool = False,
    ) -> CertKey:
        """Sign a leaf certificate and write ``<name>.crt`` and ``<name>.key``."""
        now = dt.datetime.now(dt.UTC)
        key, cert = pki.issue(
            self.key,
            self.cert,
            common_name=common_name,
            organizations=organizations,
            hosts=(*dns_names, *ip_addresses),
            server=server,
            client=client,
            not_before=now - _CLOCK_SKEW,
            not_after=now + _VALIDITY,
        )
        directory.mkdir(parents=True, exist_ok=True)
        cert_path = directory / f"{name}.crt"
        key_path = directory / f"{name}.key"
        _write(cert_path, _cert_pem(cert))
        _write(key_path, _key_pem(key), private=True)
        return CertKey(cert_path=cert_path, key_path=key_path)

    def serving(self, directory: Path, name: str) -> CertKey:
        """A serving certificate valid for 127.0.0.1 and localhost."""
        return self.issue(
            directory,
            name,
            common_name=name,
            dns_names=("localhost",),
            ip_addresses=("127.0.0.1",),
            server=True,
        )


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """An RSA key pair for service-account tokens: (private key, public key)."""
    # RS256 is the algorithm every Kubernetes version accepts for service-account tokens.
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_path = directory / "sa.key"
    public_path = directory / "sa.pub"
    _write(private_path, _key_pem(key), private=True)
    _write(
        public_path,
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return private_path, public_path
