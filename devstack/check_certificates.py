"""The certificates a Docker host's mutual TLS rests on, as `scripts/check-docker-host` reads them: the files
in DOCKER_CERT_PATH (the CA's keyUsage and expiry, the client certificate's clientAuth and issuer) and the
certificate the daemon presents (whether it names the host, is signed by ca.pem, is for serverAuth)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devstack.check_report import Report
from scheduler.providers.docker_engine.tls import TlsFiles, TlsMaterialError, client_context

Extension = TypeVar("Extension", bound=x509.ExtensionType)

EXPIRY_WARNING = dt.timedelta(days=14)
REGENERATE = "scripts/docker-host-certs --host <the host's name> [--ip <its address>]"


def check_files_and_certificates(directory: Path, report: Report) -> x509.Certificate | None:
    """The three files of DOCKER_CERT_PATH, the CA's and the client's certificates; the CA (None if unusable)."""
    missing = [name for name in ("ca.pem", "cert.pem", "key.pem") if not (directory / name).is_file()]
    if missing:
        report.add(
            "FAIL",
            f"{directory} lacks {', '.join(missing)}",
            f"DOCKER_CERT_PATH must hold ca.pem, cert.pem and key.pem (as the docker CLI expects); {REGENERATE}"
            " writes them",
        )
        return None
    report.add("ok", f"files: {directory}/ca.pem, cert.pem, key.pem")
    key_mode = (directory / "key.pem").stat().st_mode & 0o077
    if key_mode:
        report.add(
            "warn", f"key.pem is readable by others (mode {oct(key_mode)} beyond the owner)", "chmod 600 key.pem"
        )
    try:
        ca = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
        client = x509.load_pem_x509_certificate((directory / "cert.pem").read_bytes())
    except ValueError as error:
        report.add("FAIL", f"ca.pem or cert.pem is not a PEM certificate: {error}", REGENERATE)
        return None
    _check_ca(ca, report)
    _check_client(client, ca, directory, report)
    return ca


def _check_ca(ca: x509.Certificate, report: Report) -> None:
    line = f"ca.pem: {_name(ca)}, {_validity(ca)}"
    constraints = _extension(ca, x509.BasicConstraints)
    if constraints is None or not constraints.ca:
        report.add("FAIL", f"{line}: not a CA certificate (no basicConstraints CA:TRUE)", REGENERATE)
        return
    report.add(_expiry_level(ca), line, _expiry_fix(ca, "the CA"))
    usage = _extension(ca, x509.KeyUsage)
    if usage is None:
        report.add(
            "warn",
            "ca.pem has no keyUsage extension (as Docker's TLS guide makes it with `openssl req -new -x509`). The"
            " service accepts it, as the docker CLI does, but strict TLS clients (Python 3.13's default) refuse it",
            f"regenerate the certificates: {REGENERATE} (its CA carries keyUsage=critical,keyCertSign,cRLSign)",
        )
    elif not usage.key_cert_sign:
        report.add("FAIL", "ca.pem's keyUsage does not allow keyCertSign: it cannot vouch for the host", REGENERATE)


def _check_client(client: x509.Certificate, ca: x509.Certificate, directory: Path, report: Report) -> None:
    line = f"cert.pem: {_name(client)}, {_validity(client)}"
    usages = _extension(client, x509.ExtendedKeyUsage)
    if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
        report.add(
            "FAIL",
            f"{line}: its extendedKeyUsage lacks clientAuth, so the daemon refuses it",
            f"reissue it with extendedKeyUsage = clientAuth ({REGENERATE})",
        )
        return
    try:
        client_context(TlsFiles.in_directory(directory))  # as the driver loads them: no passphrase prompt
    except TlsMaterialError as error:
        report.add("FAIL", str(error), REGENERATE)
        return
    if _signed_by(client, ca):
        report.add(_expiry_level(client), f"{line}, clientAuth, signed by ca.pem", _expiry_fix(client, "cert.pem"))
    else:
        report.add(
            "warn",
            f"{line}: not signed by ca.pem (issuer {_rfc4514(client.issuer)})",
            "fine only if the daemon's --tlscacert trusts that issuer; otherwise it refuses this client",
        )


def check_server_certificate(
    hostname: str, port: int, cert_dir: Path, timeout: float, ca: x509.Certificate, report: Report
) -> None:
    """Fetch the daemon's certificate without trusting it, and say what is wrong with it, if anything."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # nosec B504 - only to read the certificate; the real check follows
    context.load_cert_chain(cert_dir / "cert.pem", cert_dir / "key.pem")
    try:
        with (
            socket.create_connection((hostname, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=hostname) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as error:
        report.add("FAIL", f"no TLS handshake with {hostname}:{port}: {error}", "is this port dockerd's TLS port?")
        return
    if der is None:
        report.add("FAIL", f"{hostname}:{port} presented no certificate", "start dockerd with --tlsverify")
        return
    server = x509.load_der_x509_certificate(der)
    names = _subject_alt_names(server)
    line = f"server certificate: {_name(server)}, names {', '.join(names) or 'nothing (no subjectAltName)'}"
    problems = []
    if not _names_host(names, hostname):
        problems.append(
            (
                f"it does not name {hostname} (the host in DOCKER_HOST)",
                f"reissue server-cert.pem with subjectAltName listing {hostname} ({REGENERATE}), or set DOCKER_HOST"
                " to a name it lists",
            )
        )
    if not _signed_by(server, ca):
        problems.append(
            (
                f"it is not signed by ca.pem (issuer {_rfc4514(server.issuer)}, ca.pem is {_rfc4514(ca.subject)})",
                "use the ca.pem that signed the daemon's server-cert.pem (the file its --tlscacert names)",
            )
        )
    usages = _extension(server, x509.ExtendedKeyUsage)
    if usages is not None and ExtendedKeyUsageOID.SERVER_AUTH not in usages:
        problems.append(("its extendedKeyUsage lacks serverAuth", f"reissue it with serverAuth ({REGENERATE})"))
    if _expiry_level(server) == "FAIL":
        problems.append((f"it {_validity(server)}", f"renew it ({REGENERATE})"))
    if not problems:
        report.add(_expiry_level(server), f"{line}; {_validity(server)}, signed by ca.pem", _expiry_fix(server, "it"))
    for problem, fix in problems:
        report.add("FAIL", f"{line}: {problem}", fix)


# --- reading a certificate ---------------------------------------------------------------------------


def _extension(certificate: x509.Certificate, kind: type[Extension]) -> Extension | None:
    try:
        return certificate.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def _subject_alt_names(certificate: x509.Certificate) -> list[str]:
    names = _extension(certificate, x509.SubjectAlternativeName)
    if not isinstance(names, x509.SubjectAlternativeName):
        return []
    return [f"DNS:{name}" for name in names.get_values_for_type(x509.DNSName)] + [
        f"IP:{address}" for address in names.get_values_for_type(x509.IPAddress)
    ]


def _names_host(names: list[str], hostname: str) -> bool:
    try:
        return f"IP:{ipaddress.ip_address(hostname)}" in names
    except ValueError:
        pass
    for name in names:
        if not name.startswith("DNS:"):
            continue
        pattern = name[4:].lower()
        if pattern == hostname.lower():
            return True
        if pattern.startswith("*.") and hostname.lower().partition(".")[2] == pattern[2:]:
            return True
    return False


def _signed_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _name(certificate: x509.Certificate) -> str:
    common = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not common:
        return _rfc4514(certificate.subject)
    value = common[0].value
    return f"CN={value.decode() if isinstance(value, bytes) else value}"


def _rfc4514(name: x509.Name) -> str:
    return name.rfc4514_string() or "(empty)"


def _validity(certificate: x509.Certificate) -> str:
    now = dt.datetime.now(dt.UTC)
    until = certificate.not_valid_after_utc
    if until <= now:
        return f"EXPIRED on {until:%Y-%m-%d}"
    if certificate.not_valid_before_utc > now:
        return f"not valid before {certificate.not_valid_before_utc:%Y-%m-%d}"
    return f"valid until {until:%Y-%m-%d} ({(until - now).days} days)"


def _expiry_level(certificate: x509.Certificate) -> str:
    now = dt.datetime.now(dt.UTC)
    if certificate.not_valid_after_utc <= now or certificate.not_valid_before_utc > now:
        return "FAIL"
    return "warn" if certificate.not_valid_after_utc - now < EXPIRY_WARNING else "ok"


def _expiry_fix(certificate: x509.Certificate, what: str) -> str | None:
    return None if _expiry_level(certificate) == "ok" else f"renew {what}: {REGENERATE}"
