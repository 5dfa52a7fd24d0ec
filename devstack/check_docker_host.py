"""Before deploying: does this Docker host work with the service? (`scripts/check-docker-host`)

    scripts/check-docker-host                           # DOCKER_HOST, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY
    scripts/check-docker-host --cert-path docker-tls --host tcp://docker.example.internal:2376
    scripts/check-docker-host --image openalice/renderer:1.4
    DOCKER_HOSTS='[{"name": "a", "host": "tcp://...", "cert_path": "..."}]' scripts/check-docker-host  # each host

It connects exactly as the local-docker driver does (same TLS checks, same API version negotiation),
shows the engine's version and API range, looks at all three certificates (the CA's keyUsage, expiry,
whether the server certificate names the host and is signed by ca.pem, whether the client certificate
is for clientAuth), then creates, starts and removes a small container from `--image` (default
$RENDERER_IMAGE, else openalice/renderer:latest; it must already be on the host). Every problem
comes with what to fix. Exit status 0 when the host works (warnings allowed), 1 otherwise.

With DOCKER_HOSTS set (a fleet) and no --host, every host of the fleet is checked in turn, each with
its own certificates; the exit status is 1 when any of them fails.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import logging
import os
import socket
import ssl
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar
from urllib.parse import urlparse

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from docker.errors import APIError, ImageNotFound, NotFound

from scheduler.deadline import Deadline
from scheduler.providers.docker_engine.client import EngineClient, connect, negotiate
from scheduler.providers.docker_engine.failures import describe
from scheduler.providers.docker_engine.tls import TlsFiles, TlsMaterialError, client_context

Extension = TypeVar("Extension", bound=x509.ExtensionType)

DEFAULT_IMAGE = "openalice/renderer:latest"
EXPIRY_WARNING = dt.timedelta(days=14)
REGENERATE = "scripts/docker-host-certs --host <the host's name> [--ip <its address>]"


@dataclass(frozen=True)
class Finding:
    """One line of the report: `ok`, `warn`, `FAIL` or `skip`, what was seen, and what to do about it."""

    level: str
    message: str
    fix: str | None = None


@dataclass
class Report:
    """Everything the check found, in order."""

    findings: list[Finding] = field(default_factory=list)

    def add(self, level: str, message: str, fix: str | None = None) -> None:
        self.findings.append(Finding(level, message, fix))

    @property
    def failed(self) -> bool:
        return any(finding.level == "FAIL" for finding in self.findings)

    @property
    def warnings(self) -> int:
        return sum(finding.level == "warn" for finding in self.findings)

    def render(self, out: TextIO) -> None:
        for finding in self.findings:
            out.write(f"  {finding.level:<5} {finding.message}\n")
            if finding.fix:
                out.write(f"        fix: {finding.fix}\n")
        if self.failed:
            out.write(f"\nThe host does NOT work with the service ({self._count('FAIL')} to fix).\n")
        else:
            warned = f" ({self.warnings} warning{'s' if self.warnings != 1 else ''})" if self.warnings else ""
            out.write(f"\nThe host works with the service{warned}.\n")

    def _count(self, level: str) -> int:
        return sum(finding.level == level for finding in self.findings)


@dataclass(frozen=True)
class Target:
    """What to check: the DOCKER_* settings, the way the service reads them."""

    host: str
    cert_dir: Path | None
    image: str
    api_version: str | None = None
    timeout: float = 10.0

    @classmethod
    def from_environment(
        cls,
        environment: Mapping[str, str],
        *,
        host: str | None = None,
        cert_path: str | None = None,
        image: str | None = None,
        api_version: str | None = None,
        timeout: float = 10.0,
    ) -> Target:
        chosen_host = host or environment.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        directory = cert_path or environment.get("DOCKER_CERT_PATH")
        tls = bool(directory or environment.get("DOCKER_TLS_VERIFY"))
        cert_dir = Path(directory or Path.home() / ".docker") if tls else None
        return cls(
            host=chosen_host,
            cert_dir=cert_dir,
            image=image or environment.get("RENDERER_IMAGE") or DEFAULT_IMAGE,
            api_version=api_version or environment.get("DOCKER_API_VERSION") or None,
            timeout=timeout,
        )

    def environment(self) -> dict[str, str]:
        """The DOCKER_* variables the driver's `connect` reads."""
        variables = {"DOCKER_HOST": self.host}
        if self.cert_dir is not None:
            variables.update({"DOCKER_CERT_PATH": str(self.cert_dir), "DOCKER_TLS_VERIFY": "1"})
        return variables


def check(target: Target) -> Report:
    """Run every check against `target`; later steps are skipped when an earlier one makes them pointless."""
    report = Report()
    parsed = urlparse(target.host if "://" in target.host else f"tcp://{target.host}")
    if parsed.scheme == "tcp" and target.cert_dir is None:
        report.add(
            "warn",
            f"{target.host} without TLS: anyone who can reach that port controls the host",
            f"protect it with mutual TLS ({REGENERATE}) and set DOCKER_CERT_PATH / DOCKER_TLS_VERIFY=1",
        )
    ca: x509.Certificate | None = None
    if target.cert_dir is not None:
        ca = _check_files_and_certificates(target.cert_dir, report)
        if report.failed:
            _skip(report, "the connection (fix the certificate files first)")
            return report
    if parsed.scheme == "tcp" and not _check_reachable(parsed.hostname or "", parsed.port or 2376, target, report):
        _skip(report, "TLS, the engine, the image and the test container (the host cannot be reached)")
        return report
    if parsed.scheme == "tcp" and target.cert_dir is not None and ca is not None:
        _check_server_certificate(parsed.hostname or "", parsed.port or 2376, target, ca, report)
    _check_engine(target, report)
    return report


# --- files and certificates ------------------------------------------------------------------------


def _check_files_and_certificates(directory: Path, report: Report) -> x509.Certificate | None:
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


# --- the network -----------------------------------------------------------------------------------


def _check_reachable(hostname: str, port: int, target: Target, report: Report) -> bool:
    try:
        with socket.create_connection((hostname, port), timeout=target.timeout):
            pass
    except ConnectionRefusedError:
        report.add(
            "FAIL",
            f"connection refused by {hostname}:{port}: no daemon listens there",
            'start dockerd with -H tcp://0.0.0.0:2376 (or "hosts" in daemon.json) and open the port to this machine',
        )
        return False
    except TimeoutError:
        report.add(
            "FAIL",
            f"no answer from {hostname}:{port} within {target.timeout:g} s",
            "check the address, and that the firewall lets this machine (and the functions' NAT address) in",
        )
        return False
    except OSError as error:
        report.add("FAIL", f"cannot connect to {hostname}:{port}: {error}", "check DOCKER_HOST")
        return False
    report.add("ok", f"connected to {hostname}:{port}")
    return True


def _check_server_certificate(hostname: str, port: int, target: Target, ca: x509.Certificate, report: Report) -> None:
    """Fetch the daemon's certificate without trusting it, and say what is wrong with it, if anything."""
    assert target.cert_dir is not None  # noqa: S101 - only called with TLS  # nosec B101
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # nosec B504 - only to read the certificate; the real check follows
    context.load_cert_chain(target.cert_dir / "cert.pem", target.cert_dir / "key.pem")
    try:
        with (
            socket.create_connection((hostname, port), timeout=target.timeout) as raw,
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


def _check_engine(target: Target, report: Report) -> None:
    """Connect as the driver does, then image and a test container."""
    try:
        client = connect(target.environment(), api_version=target.api_version, timeout=target.timeout)
        with client.within(Deadline.within(target.timeout * 2)):
            chosen = negotiate(client)
            engine = client.version(api_version=False)
    except Exception as error:  # noqa: BLE001 - every failure is reported, named, not raised
        report.add("FAIL", describe(error, target.host, str(target.cert_dir) if target.cert_dir else None), _fix(error))
        _skip(report, "the image and the test container")
        return
    how = "pinned by DOCKER_API_VERSION" if target.api_version else "negotiated"
    engine_range = f"{engine.get('MinAPIVersion', '?')}–{engine.get('ApiVersion', '?')}"
    if target.cert_dir is not None:
        report.add("ok", "TLS verified as the service verifies it, and the daemon accepted our client certificate")
    report.add(
        "ok",
        f"engine: Docker {engine.get('Version', '?')} ({engine.get('Os', '?')}/{engine.get('Arch', '?')}),"
        f" API {engine_range}; the service will speak API {chosen} ({how})",
    )
    try:
        with client.within(Deadline.within(target.timeout * 3)):
            try:
                client.inspect_image(target.image)
            except ImageNotFound:
                report.add(
                    "FAIL",
                    f"image missing: {target.image} is not on the host (nothing can be pulled for the service at"
                    " run time)",
                    f"on the host: docker pull {target.image} (or docker load it); or check another with --image",
                )
                _skip(report, "the test container (it needs the image)")
                return
            report.add("ok", f"image {target.image} is on the host")
            _check_container(client, target, report)
    except Exception as error:  # noqa: BLE001 - as above
        report.add("FAIL", describe(error, target.host, str(target.cert_dir) if target.cert_dir else None), _fix(error))
    finally:
        client.close()


def _check_container(client: EngineClient, target: Target, report: Report) -> None:
    started = time.monotonic()
    container_id = None
    try:
        created = client.create_container(
            image=target.image,
            name=f"openalice-check-{uuid.uuid4().hex[:8]}",
            labels={"openalice.scheduler/check": "true"},  # not the managed label: the reconciler ignores it
            host_config=client.create_host_config(network_mode="none"),
        )
        container_id = str(created["Id"])
        client.start(container_id)
    except APIError as error:
        report.add(
            "FAIL",
            f"the engine would not run a container from {target.image}: {error.explanation or error}",
            f"docker run --rm --network none {target.image} on the host shows the same error in full",
        )
        return
    finally:
        if container_id is not None:
            with contextlib.suppress(NotFound):
                client.remove_container(container_id, force=True)
    seconds = time.monotonic() - started
    report.add("ok", f"created, started and removed a container from {target.image} in {seconds:.1f} s")


# --- helpers ---------------------------------------------------------------------------------------


def _fix(error: BaseException) -> str | None:
    text = str(error)
    if "certificate" in text.lower() and "signed by" in text:
        return "use the ca.pem that signed the daemon's server-cert.pem (the file dockerd's --tlscacert names)"
    return None


def _skip(report: Report, what: str) -> None:
    report.add("skip", what)


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


def main(argv: list[str] | None = None, environment: Mapping[str, str] | None = None, out: TextIO = sys.stdout) -> int:
    """Check the host and print the report; 0 when it works."""
    parser = argparse.ArgumentParser(
        prog="scripts/check-docker-host", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", help="the Docker host (default $DOCKER_HOST)")
    parser.add_argument("--cert-path", help="directory with ca.pem, cert.pem, key.pem (default $DOCKER_CERT_PATH)")
    parser.add_argument("--image", help=f"image for the test container (default $RENDERER_IMAGE, else {DEFAULT_IMAGE})")
    parser.add_argument(
        "--api-version", help="speak this Engine API version (default $DOCKER_API_VERSION, else negotiate)"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each step (default 10)")
    args = parser.parse_args(argv)
    # The driver's own log lines (e.g. its keyUsage warning) would repeat what the report says.
    logging.getLogger().addHandler(logging.NullHandler())
    env = dict(os.environ if environment is None else environment)
    if env.get("DOCKER_HOSTS", "").strip() and not args.host:
        return _check_fleet(env, args, out)
    target = Target.from_environment(
        env,
        host=args.host,
        cert_path=args.cert_path,
        image=args.image,
        api_version=args.api_version,
        timeout=args.timeout,
    )
    tls = f", certificates in {target.cert_dir}" if target.cert_dir else ", without TLS"
    out.write(f"Checking the Docker host {target.host}{tls}\n\n")
    report = check(target)
    report.render(out)
    return 1 if report.failed else 0


def _check_fleet(env: dict[str, str], args: argparse.Namespace, out: TextIO) -> int:
    """Every host of DOCKER_HOSTS, one report each, and a one-line verdict per host at the end."""
    from scheduler.providers.local_docker.hosts import parse_hosts

    try:
        hosts = parse_hosts(env["DOCKER_HOSTS"])
    except ValueError as error:
        out.write(f"DOCKER_HOSTS is not a fleet this service can use: {error}\n")
        return 1
    verdicts: list[tuple[str, bool]] = []
    for spec in hosts:
        host_env = {key: value for key, value in env.items() if not key.startswith("DOCKER_")}
        host_env.update(spec.docker_environment())
        if env.get("DOCKER_API_VERSION"):
            host_env["DOCKER_API_VERSION"] = env["DOCKER_API_VERSION"]
        target = Target.from_environment(
            host_env,
            host=None,
            cert_path=args.cert_path if not spec.cert_path else None,
            image=args.image,
            api_version=args.api_version,
            timeout=args.timeout,
        )
        tls = f", certificates in {target.cert_dir}" if target.cert_dir else ", without TLS"
        out.write(f"== {spec.name}: checking the Docker host {target.host}{tls}\n\n")
        report = check(target)
        report.render(out)
        out.write("\n")
        verdicts.append((spec.name, not report.failed))
    out.write("Fleet: " + ", ".join(f"{name} {'works' if ok else 'FAILS'}" for name, ok in verdicts) + "\n")
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
