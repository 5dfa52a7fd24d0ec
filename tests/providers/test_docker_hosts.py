"""The local-docker driver against the Docker hosts users actually run, all real engines on loopback.

- a host secured exactly as Docker's TLS guide shows (its CA has no keyUsage: Python 3.13 refuses it
  by default, the docker CLI accepts it);
- Docker Engine 29's API version gate (1.44–1.52), through a stand-in proxy in front of a real 20.10;
- engines that accept connections and never answer (no TLS handshake; or a frozen dockerd after it);
- wrong, expired and misnamed certificates, each failure named.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import shutil
import socket
import ssl
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devstack.docker_tls import generate_untrusted_client
from devstack.worker_image import WORKER_IMAGES
from scheduler.deadline import Deadline
from scheduler.lifecycle import LeaseStatus
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import (
    LEASE_ID_LABEL,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    WorkerOutcomeUnknown,
)
from scheduler.providers.docker_engine import client as engine_client
from scheduler.providers.docker_engine import tls as engine_tls
from scheduler.providers.docker_engine.api_versions import parse
from scheduler.providers.docker_engine.client import connect, negotiate
from scheduler.providers.local_docker.driver import LocalDockerProvider
from tests.support.engine29_proxy import Engine29Proxy
from tests.support.silent_engine import SilentEngine

IMAGES = {WorkerKind.RENDERER: WORKER_IMAGES["renderer"], WorkerKind.ANIM: WORKER_IMAGES["anim"]}
# Generous against a loaded CI machine; what is asserted is "about the deadline", never "fast".
DEADLINE_SLACK_SECONDS = 3.0


def _lease(gpu: GpuClass = GpuClass.NONE) -> Lease:
    created_at = datetime.now(UTC).replace(microsecond=0)
    return Lease(
        lease_id=str(uuid.uuid4()),
        provider="local-docker",
        kind=WorkerKind.RENDERER,
        gpu=gpu,
        status=LeaseStatus.PENDING,
        created_at=created_at,
        expires_at=created_at + timedelta(seconds=600),
        ttl_seconds=600,
    )


def _driver(environment: Mapping[str, str], api_version: str | None = None) -> LocalDockerProvider:
    return LocalDockerProvider(
        connect=lambda: connect(environment, api_version=api_version), images=IMAGES, network="none", worker_port=8080
    )


def _labelled(client: Any, lease_id: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{LEASE_ID_LABEL}={lease_id}"}))


@pytest.fixture(autouse=True)
def _fresh_negotiation() -> Iterator[None]:
    """Each test starts as a cold start does: no API version known for any host."""
    engine_client.forget_negotiated()
    yield
    engine_client.forget_negotiated()


@pytest.fixture
def docs_client(docs_style_host: Any) -> Iterator[Any]:
    client = docs_style_host.client()
    yield client
    client.close()


@pytest.fixture
def engine29(docker_host: Any) -> Iterator[Engine29Proxy]:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path)).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def cleanup(docker_client: Any, docs_client: Any) -> Iterator[list[str]]:
    """Lease ids whose containers (on either host) are removed after the test."""
    lease_ids: list[str] = []
    yield lease_ids
    for lease_id in lease_ids:
        for client in (docker_client, docs_client):
            for container in _labelled(client, lease_id):
                container.remove(force=True)


# --- a host secured as Docker's guide shows ------------------------------------------------------


def test_a_host_secured_as_dockers_guide_shows_serves_a_lease(
    docs_style_host: Any, docs_client: Any, cleanup: list[str]
) -> None:
    driver = _driver(docs_style_host.env())
    lease = _lease()
    cleanup.append(lease.lease_id)

    worker = driver.provision(lease, {})
    assert docs_client.containers.get(worker.token).status == "running"
    assert worker.token in {listed.token for listed in driver.list_managed()}
    driver.release(lease.lease_id, worker.token)

    assert _labelled(docs_client, lease.lease_id) == []


def test_the_guides_ca_is_what_python_3_13_strict_verification_refuses(docs_style_host: Any) -> None:
    # What the driver relaxes, shown on the real host: the same handshake with VERIFY_X509_STRICT
    # (Python 3.13's default) fails on the CA's missing keyUsage.
    certs = Path(docs_style_host.cert_path)
    strict = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    strict.verify_flags |= ssl.VERIFY_X509_STRICT
    strict.load_cert_chain(certs / "cert.pem", certs / "key.pem")

    with pytest.raises(ssl.SSLCertVerificationError, match="key usage"):
        _handshake(strict, docs_style_host.port)

    relaxed = engine_tls.client_context(engine_tls.TlsFiles.in_directory(certs))
    _handshake(relaxed, docs_style_host.port)


def test_the_guides_ca_is_reported_once_at_warning_level_with_how_to_regenerate(
    docs_style_host: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_tls, "_warned", set())
    caplog.set_level(logging.WARNING)

    for _ in range(3):
        engine_tls.client_context(engine_tls.TlsFiles.in_directory(Path(docs_style_host.cert_path)))

    warnings = [record for record in caplog.records if "keyUsage" in record.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "scripts/docker-host-certs" in warnings[0].getMessage()


def test_a_ca_with_key_usage_draws_no_warning(
    docker_host: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_tls, "_warned", set())
    caplog.set_level(logging.WARNING)

    engine_tls.client_context(engine_tls.TlsFiles.in_directory(Path(docker_host.cert_path)))

    assert not [record for record in caplog.records if "keyUsage" in record.getMessage()]


def test_the_guides_host_still_refuses_a_client_certificate_from_another_ca(
    docs_style_host: Any, tmp_path: Path, cleanup: list[str], docs_client: Any
) -> None:
    rogue = generate_untrusted_client(tmp_path / "rogue", server_ca=Path(docs_style_host.cert_path) / "ca.pem")
    driver = _driver({**docs_style_host.env(), "DOCKER_CERT_PATH": str(rogue)})
    lease = _lease()
    cleanup.append(lease.lease_id)

    with pytest.raises(ProviderUnreachable, match="refused our client certificate"):
        driver.provision(lease, {})
    assert _labelled(docs_client, lease.lease_id) == []


def test_the_guides_host_is_not_trusted_through_another_hosts_ca(docs_style_host: Any, docker_host: Any) -> None:
    # Our dev host's ca.pem (with its valid client cert) must not vouch for the guide's host.
    driver = _driver({**docs_style_host.env(), "DOCKER_CERT_PATH": str(docker_host.cert_path)})

    with pytest.raises(ProviderUnreachable, match="TLS verification of the Docker host's certificate failed"):
        driver.provision(_lease(), {})


# --- named TLS failures --------------------------------------------------------------------------


def test_a_client_given_the_wrong_ca_names_the_tls_verification_failure(docker_host: Any, tmp_path: Path) -> None:
    wrong = generate_untrusted_client(tmp_path / "wrong-ca")
    for name in ("cert.pem", "key.pem"):
        shutil.copyfile(Path(docker_host.cert_path) / name, wrong / name)
    driver = _driver({**docker_host.env(), "DOCKER_CERT_PATH": str(wrong)})

    with pytest.raises(ProviderUnreachable) as raised:
        driver.provision(_lease(), {})

    message = str(raised.value)
    assert "TLS verification of the Docker host's certificate failed" in message
    assert "unable to get local issuer certificate" in message  # OpenSSL's own words, verify_message
    assert f"{wrong}/ca.pem" in message


def test_ca_bundle_variables_cannot_add_trust_to_the_hosts_own_ca(
    docker_host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # REQUESTS_CA_BUNDLE names the host's real CA, DOCKER_CERT_PATH an unrelated one: only the latter counts.
    wrong = generate_untrusted_client(tmp_path / "wrong-ca")
    for name in ("cert.pem", "key.pem"):
        shutil.copyfile(Path(docker_host.cert_path) / name, wrong / name)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(Path(docker_host.cert_path) / "ca.pem"))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(Path(docker_host.cert_path) / "ca.pem"))
    client = connect({**docker_host.env(), "DOCKER_CERT_PATH": str(wrong)})
    client.trust_env = True  # even a session that reads the environment

    with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        client.version(api_version=False)


def test_a_host_name_the_certificate_does_not_list_is_named_a_mismatch(docker_host: Any) -> None:
    # The host's own certificate, served on 127.0.0.2 (loopback, but not in its subjectAltName).
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path), address="127.0.0.2").start()
    try:
        with pytest.raises(ProviderUnreachable, match=r"host name mismatch: .* does not name 127\.0\.0\.2"):
            _driver(proxy.env()).provision(_lease(), {})
    finally:
        proxy.stop()


def test_an_expired_host_certificate_is_named(docs_style_host: Any, tmp_path: Path) -> None:
    certs = _reissued_server_cert(
        Path(docs_style_host.cert_path), tmp_path / "expired", valid_until=datetime.now(UTC) - timedelta(days=1)
    )
    proxy = Engine29Proxy(docs_style_host.host, certs).start()
    try:
        with pytest.raises(ProviderUnreachable, match=r"TLS verification .* failed: certificate has expired"):
            _driver(proxy.env()).provision(_lease(), {})
    finally:
        proxy.stop()


def test_a_host_named_only_in_the_common_name_is_refused_as_the_docker_cli_refuses_it(
    docs_style_host: Any, tmp_path: Path
) -> None:
    # Go ignores the subject CN (no subjectAltName: no name); Python would fall back to it unless told not to.
    certs = _reissued_server_cert(Path(docs_style_host.cert_path), tmp_path / "cn-only", subject_alt_names=False)
    proxy = Engine29Proxy(docs_style_host.host, certs).start()
    try:
        port = proxy.host.rsplit(":", 1)[1]
        with pytest.raises(ProviderUnreachable, match=r"host name mismatch: .* does not name localhost"):
            _driver({**proxy.env(), "DOCKER_HOST": f"tcp://localhost:{port}"}).provision(_lease(), {})
    finally:
        proxy.stop()


def test_connection_refused_is_named(docker_host: Any) -> None:
    with SilentEngine() as silent:
        port = silent.port
    with pytest.raises(ProviderUnreachable, match=f"connection refused by 127.0.0.1:{port}"):
        _driver({**docker_host.env(), "DOCKER_HOST": f"tcp://127.0.0.1:{port}"}).provision(_lease(), {})


def test_a_missing_image_is_named(docker_host: Any) -> None:
    missing = f"openalice/missing-{uuid.uuid4().hex[:8]}:dev"
    driver = LocalDockerProvider(
        connect=lambda: connect(docker_host.env()),
        images={WorkerKind.RENDERER: missing, WorkerKind.ANIM: missing},
        network="none",
        worker_port=8080,
    )
    with pytest.raises(ProviderRequestFailed, match=f"image missing: the worker image '{missing}' is not on"):
        driver.provision(_lease(), {})


def test_a_gpu_the_host_does_not_have_is_named(docker_host: Any, docker_client: Any) -> None:
    lease = _lease(gpu=GpuClass.ENTRY)
    with pytest.raises(ProviderCapacityError, match="GPU not available on the Docker host"):
        _driver(docker_host.env()).provision(lease, {})
    assert _labelled(docker_client, lease.lease_id) == []


# --- API versions: Engine 20.10 and Engine 29 ---------------------------------------------------


def test_engine_20_10_is_spoken_to_in_api_1_41(docker_host: Any) -> None:
    client = connect(docker_host.env())
    assert negotiate(client) == "1.41"


def test_engine_29s_gate_is_negotiated_and_serves_a_lease(
    engine29: Engine29Proxy, docker_client: Any, cleanup: list[str]
) -> None:
    driver = _driver(engine29.env())
    lease = _lease()
    cleanup.append(lease.lease_id)

    worker = driver.provision(lease, {})
    assert docker_client.containers.get(worker.token).status == "running"
    driver.release(lease.lease_id, worker.token)

    spoken = {request.split()[1].split("/")[1] for request in engine29.requests_seen if " /v1." in request}
    assert spoken == {f"v{engine_client.NEWEST_SUPPORTED}"}  # the highest both sides speak (docker-py 7.2: 1.45)
    assert parse(engine_client.NEWEST_SUPPORTED) >= (1, 44)
    assert _labelled(docker_client, lease.lease_id) == []


def test_negotiation_costs_one_version_request_per_host_per_environment(engine29: Engine29Proxy) -> None:
    for _ in range(3):
        driver = _driver(engine29.env())
        driver.list_managed()
        driver.list_managed()

    assert [request for request in engine29.requests_seen if request.endswith(" /version")] == ["GET /version"]


def test_a_pinned_version_below_engine_29s_floor_is_named_api_version_refused(engine29: Engine29Proxy) -> None:
    driver = _driver(engine29.env(), api_version="1.41")

    with pytest.raises(ProviderUnreachable) as raised:
        driver.provision(_lease(), {})

    message = str(raised.value)
    assert message.startswith("API version refused by the engine: client version 1.41 is too old.")
    assert "Minimum supported API version is 1.44" in message
    assert "DOCKER_API_VERSION" in message
    assert not [request for request in engine29.requests_seen if request.endswith(" /version")]  # pinned: not asked


def test_a_pinned_version_the_engine_refuses_stays_pinned(engine29: Engine29Proxy) -> None:
    driver = _driver(engine29.env(), api_version="1.41")

    for _ in range(2):
        with pytest.raises(ProviderRequestFailed, match="API version refused"):
            driver.list_managed()

    assert not [request for request in engine29.requests_seen if request.endswith(" /version")]


def test_an_engine_upgraded_under_a_warm_environment_is_negotiated_again(
    engine29: Engine29Proxy, cleanup: list[str]
) -> None:
    # This environment negotiated 1.41 with the host when it ran Engine 20.10; now it runs Engine 29.
    engine_client._negotiated[engine29.host] = "1.41"
    driver = _driver(engine29.env())

    with pytest.raises(ProviderRequestFailed, match=r"API version refused by the engine: client version 1\.41 is too"):
        driver.list_managed()
    driver.list_managed()

    assert engine29.requests_seen[-1].startswith(f"GET /v{engine_client.NEWEST_SUPPORTED}/containers/json?")
    assert engine_client._negotiated[engine29.host] == engine_client.NEWEST_SUPPORTED


def test_a_pinned_version_within_the_engines_range_is_spoken_as_pinned(engine29: Engine29Proxy) -> None:
    driver = _driver(engine29.env(), api_version="1.44")

    driver.list_managed()

    assert engine29.requests_seen
    assert all(request.startswith("GET /v1.44/containers/json?") for request in engine29.requests_seen)


# --- hung engines ----------------------------------------------------------------------------------


def test_provision_on_an_engine_that_never_answers_gives_up_by_the_deadline(docker_host: Any) -> None:
    with SilentEngine() as silent:
        driver = _driver({**docker_host.env(), "DOCKER_HOST": silent.host})
        started = time.monotonic()

        with pytest.raises(ProviderUnreachable, match=r"timed out .* during the TLS handshake"):
            driver.provision(_lease(), {}, Deadline.within(2.0))

    assert time.monotonic() - started < 2.0 + DEADLINE_SLACK_SECONDS


def test_a_frozen_engine_after_the_handshake_times_out_by_the_deadline(docker_host: Any) -> None:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path), mute=True).start()
    try:
        driver = _driver(proxy.env(), api_version="1.44")
        started = time.monotonic()

        with pytest.raises(ProviderUnreachable, match=r"timed out .* waiting for an answer"):
            driver.provision(_lease(), {}, Deadline.within(2.0))

        assert time.monotonic() - started < 2.0 + DEADLINE_SLACK_SECONDS
        assert any("/containers/create" in request for request in proxy.requests_seen)
    finally:
        proxy.stop()


def test_a_create_lost_with_no_time_left_to_clean_up_is_left_to_the_reconciler(docker_host: Any) -> None:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path), mute=True).start()
    try:
        with pytest.raises(WorkerOutcomeUnknown, match="a container may have been made and is left to the reconciler"):
            _driver(proxy.env(), api_version="1.44").provision(_lease(), {}, Deadline.within(1.5))
    finally:
        proxy.stop()


def test_release_on_an_engine_that_never_answers_fails_by_the_deadline(docker_host: Any) -> None:
    with SilentEngine() as silent:
        driver = _driver({**docker_host.env(), "DOCKER_HOST": silent.host}, api_version="1.41")
        started = time.monotonic()

        with pytest.raises(ProviderRequestFailed, match="timed out"):
            driver.release(str(uuid.uuid4()), "abc", Deadline.within(1.5))

    assert time.monotonic() - started < 1.5 + DEADLINE_SLACK_SECONDS


# --- workers that stopped behind our back ---------------------------------------------------------


def test_a_killed_worker_is_reported_stopped_with_its_exit_code_and_signal(
    docker_host: Any, docker_client: Any, cleanup: list[str]
) -> None:
    driver = _driver(docker_host.env())
    killed, running = _lease(), _lease()
    cleanup += [killed.lease_id, running.lease_id]
    worker = driver.provision(killed, {})
    driver.provision(running, {})

    docker_client.containers.get(worker.token).kill()

    stopped = {item.lease_id: item for item in driver.stopped_workers()}
    assert running.lease_id not in stopped
    assert stopped[killed.lease_id].token == worker.token
    assert stopped[killed.lease_id].reason.startswith("the worker container exited with code 137, SIGKILL at 20")


def test_a_killed_worker_is_marked_stopped_in_the_full_listing(
    docker_host: Any, docker_client: Any, cleanup: list[str]
) -> None:
    driver = _driver(docker_host.env())
    lease = _lease()
    cleanup.append(lease.lease_id)
    worker = driver.provision(lease, {})
    docker_client.containers.get(worker.token).kill()

    listed = {item.token: item for item in driver.list_managed()}

    assert "exited with code 137" in str(listed[worker.token].stopped_reason)


def test_stopped_reason_is_none_while_the_worker_runs(docker_host: Any, cleanup: list[str]) -> None:
    driver = _driver(docker_host.env())
    lease = _lease()
    cleanup.append(lease.lease_id)
    worker = driver.provision(lease, {})

    assert driver.stopped_reason(lease.lease_id, worker.token) is None


def test_stopped_reason_of_a_removed_worker_says_it_no_longer_exists(
    docker_host: Any, docker_client: Any, cleanup: list[str]
) -> None:
    driver = _driver(docker_host.env())
    lease = _lease()
    cleanup.append(lease.lease_id)
    worker = driver.provision(lease, {})
    docker_client.containers.get(worker.token).remove(force=True)

    assert "no longer exists" in str(driver.stopped_reason(lease.lease_id, worker.token))


def test_a_worker_stuck_restarting_is_reported_stopped(docker_host: Any, docker_client: Any) -> None:
    lease_id = str(uuid.uuid4())
    container = docker_client.containers.run(
        IMAGES[WorkerKind.RENDERER],
        ["sh", "-c", "exit 3"],
        detach=True,
        network_mode="none",
        restart_policy={"Name": "always"},
        labels={"openalice.scheduler/managed": "true", LEASE_ID_LABEL: lease_id},
    )
    try:
        driver = _driver(docker_host.env())
        deadline = time.monotonic() + 30
        reason = None
        while time.monotonic() < deadline:
            container.reload()
            if container.attrs["State"]["Restarting"]:
                reason = driver.stopped_reason(lease_id, container.id)
                if reason and "restarting" in reason:
                    break
            time.sleep(0.1)
        assert reason is not None and reason.startswith("the worker container is stuck restarting (last exit code 3")
    finally:
        container.remove(force=True)


# --- helpers ---------------------------------------------------------------------------------------


def _handshake(context: ssl.SSLContext, port: int) -> None:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"GET /_ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert tls.recv(64).startswith(b"HTTP/1.1 200")


def _reissued_server_cert(
    source: Path,
    target: Path,
    *,
    valid_until: datetime | None = None,
    subject_alt_names: bool = True,
) -> Path:
    """A copy of `source` (ca.pem, client cert) whose server certificate is reissued by the same CA.

    Default: CN=localhost, subjectAltName DNS:localhost, IP:127.0.0.1, valid for 30 days. With
    `valid_until` in the past it is expired; without subject_alt_names it names the host in its CN only.
    """
    target.mkdir(parents=True)
    for name in ("ca.pem", "cert.pem", "key.pem"):
        shutil.copyfile(source / name, target / name)
    ca_cert = x509.load_pem_x509_certificate((source / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((source / "ca-key.pem").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    until = valid_until or now + timedelta(days=30)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(min(now, until) - dt.timedelta(days=30))
        .not_valid_after(until)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    )
    if subject_alt_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    certificate = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    (target / "server-cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (target / "server-key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return target
