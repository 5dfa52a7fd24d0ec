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
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import urlparse

from cryptography import x509
from docker.errors import APIError, ImageNotFound, NotFound

from devstack.check_certificates import REGENERATE, check_files_and_certificates, check_server_certificate
from devstack.check_report import Report
from scheduler.deadline import Deadline
from scheduler.providers.docker_engine.client import EngineClient, connect, negotiate
from scheduler.providers.docker_engine.failures import describe

DEFAULT_IMAGE = "openalice/renderer:latest"


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
        ca = check_files_and_certificates(target.cert_dir, report)
        if report.failed:
            _skip(report, "the connection (fix the certificate files first)")
            return report
    if parsed.scheme == "tcp" and not _check_reachable(parsed.hostname or "", parsed.port or 2376, target, report):
        _skip(report, "TLS, the engine, the image and the test container (the host cannot be reached)")
        return report
    if parsed.scheme == "tcp" and target.cert_dir is not None and ca is not None:
        check_server_certificate(
            parsed.hostname or "", parsed.port or 2376, target.cert_dir, target.timeout, ca, report
        )
    _check_engine(target, report)
    return report


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
