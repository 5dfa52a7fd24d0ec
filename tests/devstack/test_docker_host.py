"""The loopback TLS Docker host: mutual TLS is enforced, and the worker image runs over it."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from pathlib import Path

import certifi
import docker  # type: ignore[import-untyped]
import docker.errors  # type: ignore[import-untyped]
import pytest
import requests
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from devstack.docker_clients import tls_client
from devstack.docker_host import (
    DockerHostError,
    DockerHostUnavailable,
    TlsDockerHost,
    check_prerequisites,
    start_tls_docker_host,
)
from devstack.docker_tls import generate_tls_material, generate_untrusted_client
from devstack.worker_image import ensure_worker_images


@pytest.fixture(scope="session")
def docker_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsDockerHost]:
    try:
        check_prerequisites()
    except DockerHostUnavailable as error:
        unavailable = f"the TLS Docker host cannot run here: {error}"
    else:
        unavailable = ""
    if unavailable and os.environ.get("CI") == "true":
        pytest.fail(unavailable, pytrace=False)  # CI must have dockerd: a skip would hide that
    if unavailable:
        pytest.skip(unavailable)
    host = start_tls_docker_host(tmp_path_factory.mktemp("docker-host"))
    yield host
    host.stop()


@pytest.fixture(scope="session")
def worker_images(docker_host: TlsDockerHost) -> dict[str, str]:
    client = docker_host.client()
    try:
        return ensure_worker_images(client)
    finally:
        client.close()


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxy or CA-bundle variables from this machine
    return session


def _certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _extended_usages(path: Path) -> list[x509.ObjectIdentifier]:
    return list(_certificate(path).extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_tls_material_has_the_right_names_usages_and_modes(tmp_path: Path) -> None:
    material = generate_tls_material(tmp_path)

    san = _certificate(material.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.value.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert _extended_usages(material.server_cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert _extended_usages(material.client_cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    for key in (material.ca_key, material.server_key, material.client_key):
        assert key.stat().st_mode & 0o777 == 0o600
    # DOCKER_CERT_PATH's names for the client side.
    assert material.client_cert == tmp_path / "cert.pem" and material.client_key == tmp_path / "key.pem"
    assert material.ca_cert == tmp_path / "ca.pem"


def test_tls_material_is_reused_until_incomplete(tmp_path: Path) -> None:
    generate_tls_material(tmp_path)
    ca = (tmp_path / "ca.pem").read_bytes()

    generate_tls_material(tmp_path)
    assert (tmp_path / "ca.pem").read_bytes() == ca

    (tmp_path / "server-key.pem").unlink()
    generate_tls_material(tmp_path)
    assert (tmp_path / "ca.pem").read_bytes() != ca


def test_tls_client_pings_and_runs_a_worker_container(
    docker_host: TlsDockerHost, worker_images: dict[str, str]
) -> None:
    assert docker_host.host == f"tcp://127.0.0.1:{docker_host.port}"
    client = docker_host.client()
    assert client.ping()
    renderer, anim = (client.images.get(worker_images[kind]) for kind in ("renderer", "anim"))
    assert renderer.id == anim.id
    assert renderer.attrs["Config"]["Cmd"] == ["/bin/sleep", "86400"]

    container = client.containers.run(worker_images["renderer"], ["echo", "hello"], network_mode="none", detach=True)
    try:
        assert container.wait(timeout=30)["StatusCode"] == 0
        assert container.logs() == b"hello\n"
        assert container.attrs["HostConfig"]["NetworkMode"] == "none"
    finally:
        container.remove(force=True)
        client.close()


def test_plain_http_is_refused(docker_host: TlsDockerHost) -> None:
    response = _session().get(f"http://127.0.0.1:{docker_host.port}/_ping", timeout=5)
    assert response.status_code == 400  # Go's answer to HTTP on a TLS port

    plain = docker.DockerClient(base_url=f"tcp://127.0.0.1:{docker_host.port}", version=docker_host.api_version)
    with pytest.raises(docker.errors.APIError):
        plain.ping()


def test_tls_client_without_a_certificate_is_refused(docker_host: TlsDockerHost) -> None:
    # "_ALERT_": the server itself ended the handshake (not our side failing to verify it).
    with pytest.raises(requests.exceptions.SSLError, match="_ALERT_"):
        _session().get(
            f"https://127.0.0.1:{docker_host.port}/_ping", verify=str(docker_host.cert_path / "ca.pem"), timeout=5
        )


def test_client_certificate_from_another_ca_is_refused(docker_host: TlsDockerHost, tmp_path: Path) -> None:
    rogue = generate_untrusted_client(tmp_path, server_ca=docker_host.cert_path / "ca.pem")
    client = tls_client(docker_host.host, rogue, version=str(docker_host.api_version), timeout=5)
    # The server is verified (ca.pem is ours); the server then rejects the client's certificate.
    with pytest.raises(requests.exceptions.SSLError, match="_ALERT_"):
        client.ping()


def test_ca_bundle_variables_do_not_replace_our_ca(docker_host: TlsDockerHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi.where())
    monkeypatch.setenv("CURL_CA_BUNDLE", certifi.where())

    assert docker_host.client().ping()

    # The client's TLS context alone decides trust: even a session told to read the environment
    # keeps verifying the daemon against the host's own CA, not the system bundle.
    reading_env = tls_client(docker_host.host, docker_host.cert_path, version=str(docker_host.api_version))
    reading_env.api.trust_env = True
    assert reading_env.ping()
    # docker-py's own client lets requests swap the CA: docker.from_env's version="auto" asks the
    # daemon inside the constructor, so it fails there.
    with pytest.raises(docker.errors.DockerException, match="CERTIFICATE_VERIFY_FAILED"):
        docker.from_env(environment=docker_host.env())


def test_start_reuses_the_running_daemon(docker_host: TlsDockerHost) -> None:
    again = start_tls_docker_host(docker_host.state_dir)
    assert again.reused
    assert (again.pid, again.host) == (docker_host.pid, docker_host.host)

    with pytest.raises(DockerHostError, match="already runs"):
        start_tls_docker_host(docker_host.state_dir, port=docker_host.port + 1)
