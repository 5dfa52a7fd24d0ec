"""Docker SDK clients of a Docker host, connected exactly as the service's local-docker driver connects
(`scheduler.providers.docker_engine`): the same TLS checks, the same API version negotiation."""

from __future__ import annotations

from pathlib import Path

import docker


def client_from_env(environment: dict[str, str], timeout: int = 60) -> docker.DockerClient:
    """A `docker.DockerClient` for the DOCKER_* variables in `environment`, as the service connects."""
    return _connected(environment, environment.get("DOCKER_API_VERSION") or None, timeout)


def tls_client(host: str, cert_path: Path, version: str | None = None, timeout: int = 60) -> docker.DockerClient:
    """A `docker.DockerClient` using `cert_path`'s cert.pem/key.pem, trusting only its ca.pem.

    Built on the local-docker driver's own client (scheduler.providers.docker_engine), so the dev
    tools verify TLS exactly as the service does (a CA without keyUsage, as Docker's guide makes it,
    works on Python 3.13 too) and speak the API version negotiated with the engine unless `version`
    pins one.
    """
    environment = {"DOCKER_HOST": host, "DOCKER_CERT_PATH": str(cert_path), "DOCKER_TLS_VERIFY": "1"}
    return _connected(environment, version, timeout)


def _connected(environment: dict[str, str], api_version: str | None, timeout: int) -> docker.DockerClient:
    from scheduler.providers.docker_engine.client import connect, negotiate

    api = connect(environment, api_version=api_version, timeout=timeout)
    try:
        negotiate(api)
    except Exception:
        api.close()
        raise
    return docker_client_on(api)


def docker_client_on(api: docker.APIClient) -> docker.DockerClient:
    """A high-level `docker.DockerClient` over an existing low-level client."""
    # DockerClient.__init__ only builds an APIClient from its arguments; this one is built already.
    client: docker.DockerClient = docker.DockerClient.__new__(docker.DockerClient)
    client.api = api
    return client


def server_api_version(host: str, cert_path: Path, timeout: int) -> str:
    client = tls_client(host, cert_path, timeout=timeout)
    try:
        return str(client.api.api_version)
    finally:
        client.close()
