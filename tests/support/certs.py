"""Throw-away TLS material for the secured-broker tests, made at test time with `cryptography` (nothing is
committed): a CA, a broker certificate for 127.0.0.1/localhost, a client certificate for mutual TLS, and
a second CA nobody trusts (the "untrusted CA" case)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    broker_cert: Path
    broker_key: Path
    client_cert: Path
    client_key: Path
    other_ca_file: Path  # a CA that signed nothing the broker presents


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key, now = _key(), datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key, ca_cert, cn: str, usage, sans=()) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key, now = _key(), datetime.now(UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _write(path: Path, key=None, cert=None) -> Path:
    if key is not None:  # unencrypted PKCS#8: the format Kafka's PEM keystore reads
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        path.chmod(0o600)
    else:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca("credence test CA")
    _, other = _ca("somebody else's CA")
    sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    broker_key, broker = _leaf(ca_key, ca, "localhost", ExtendedKeyUsageOID.SERVER_AUTH, sans)
    client_key, client = _leaf(ca_key, ca, "credence-worker", ExtendedKeyUsageOID.CLIENT_AUTH)
    return Pki(
        ca_file=_write(folder / "ca.pem", cert=ca),
        broker_cert=_write(folder / "broker.pem", cert=broker),
        broker_key=_write(folder / "broker.key", key=broker_key),
        client_cert=_write(folder / "client.pem", cert=client),
        client_key=_write(folder / "client.key", key=client_key),
        other_ca_file=_write(folder / "other-ca.pem", cert=other),
    )
