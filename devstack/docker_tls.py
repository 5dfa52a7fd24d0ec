"""The loopback Docker daemon's TLS material: a private CA, a server certificate for 127.0.0.1/localhost and
a client certificate, as `dockerd --tlsverify` and DOCKER_CERT_PATH take them; and a client certificate
from an unrelated CA, for the tests that the daemon refuses it."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_VALIDITY = dt.timedelta(days=30)
CERT_MIN_REMAINING = dt.timedelta(days=1)

_TLS_FILES = ("ca.pem", "ca-key.pem", "server-cert.pem", "server-key.pem", "cert.pem", "key.pem")


@dataclass(frozen=True)
class TlsMaterial:
    """Paths of the CA, server and client certificates and keys in one directory."""

    directory: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def in_directory(cls, directory: Path) -> TlsMaterial:
        """The standard file names inside `directory` (as DOCKER_CERT_PATH expects for the client)."""
        return cls(
            directory=directory,
            ca_cert=directory / "ca.pem",
            ca_key=directory / "ca-key.pem",
            server_cert=directory / "server-cert.pem",
            server_key=directory / "server-key.pem",
            client_cert=directory / "cert.pem",
            client_key=directory / "key.pem",
        )


def generate_tls_material(directory: Path) -> TlsMaterial:
    """Write a private CA, a server cert for 127.0.0.1/localhost and a client cert into `directory`.

    Reuses the existing files while they chain to the CA and stay valid for more than a day.
    """
    material = TlsMaterial.in_directory(directory)
    if _tls_material_usable(material):
        return material
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = utcnow()
    ca_key, ca_cert = _new_ca("openalice dev Docker CA", now)
    server_key = _new_key()
    server_cert = _issue(
        ca_key,
        ca_cert,
        server_key,
        "localhost",
        now,
        ExtendedKeyUsageOID.SERVER_AUTH,
        x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
    )
    client_key = _new_key()
    client_cert = _issue(ca_key, ca_cert, client_key, "openalice dev client", now, ExtendedKeyUsageOID.CLIENT_AUTH)
    # Keys before certificates: a run cut short leaves a cert that no longer chains, so the
    # next run regenerates everything instead of pairing a cert with the wrong key.
    _write_key(material.ca_key, ca_key)
    _write_cert(material.ca_cert, ca_cert)
    _write_key(material.server_key, server_key)
    _write_cert(material.server_cert, server_cert)
    _write_key(material.client_key, client_key)
    _write_cert(material.client_cert, client_cert)
    return material


def generate_untrusted_client(directory: Path, server_ca: Path | None = None) -> Path:
    """Write `cert.pem`/`key.pem` signed by a fresh, unrelated CA into `directory`, and return it.

    `ca.pem` is a copy of `server_ca` when given (so the server still verifies), else the rogue CA.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = utcnow()
    rogue_key, rogue_cert = _new_ca("unrelated CA", now)
    client_key = _new_key()
    client_cert = _issue(
        rogue_key, rogue_cert, client_key, "openalice dev client", now, ExtendedKeyUsageOID.CLIENT_AUTH
    )
    _write_cert(directory / "rogue-ca.pem", rogue_cert)
    _write_key(directory / "key.pem", client_key)
    _write_cert(directory / "cert.pem", client_cert)
    if server_ca is not None:
        shutil.copyfile(server_ca, directory / "ca.pem")
    else:
        _write_cert(directory / "ca.pem", rogue_cert)
    return directory


def _tls_material_usable(material: TlsMaterial) -> bool:
    if not all((material.directory / name).is_file() for name in _TLS_FILES):
        return False
    try:
        ca = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
        leaves = [
            x509.load_pem_x509_certificate(path.read_bytes()) for path in (material.server_cert, material.client_cert)
        ]
        for leaf in leaves:
            leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    deadline = utcnow() + CERT_MIN_REMAINING
    return all(cert.not_valid_after_utc > deadline for cert in (ca, *leaves))


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _new_ca(common_name: str, now: dt.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _new_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    common_name: str,
    now: dt.datetime,
    usage: x509.ObjectIdentifier,
    san: x509.SubjectAlternativeName | None = None,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_atomically(path, data, 0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    write_atomically(path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temporary, mode)  # O_CREAT's mode is filtered by the umask
    os.replace(temporary, path)
