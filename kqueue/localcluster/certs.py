"""Certificates and keys for the local control plane.

One throwaway CA signs everything: the serving certificates (kube-apiserver, admission webhooks
served by tests), the admin client certificate (group ``system:masters``) and the client
certificates the other components use. The service-account key pair signs and verifies
service-account tokens. All of it lives in the cluster's temporary directory and dies with it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=7)
_CLOCK_SKEW = dt.timedelta(minutes=5)


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys are generated in microseconds (RSA-2048 takes tens of milliseconds each).
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


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
        key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
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
        key = _key()
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
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
