"""The `local-docker` driver: one container per lease on a self-hosted Docker host, over mutual TLS.

This module is the only code that speaks the Docker Engine API.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from threading import Lock
from typing import Any
from urllib.parse import urlparse

import docker
import requests
from aws_lambda_powertools import Logger
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest

from scheduler.config import Settings
from scheduler.models import GpuClass, Lease, LeaseRequest, WorkerKind, format_time
from scheduler.providers.base import (
    KIND_LABEL,
    LEASE_ID_LABEL,
    MANAGED_LABEL,
    ManagedWorker,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    worker_name,
)

logger = Logger(child=True)

NAME = "local-docker"
_API_TIMEOUT_SECONDS = 20
# A fixed API version (Engine 20.10+) instead of "auto": "auto" costs a round trip at every cold
# start and runs before the client can be told to ignore the CA-bundle variables.
_DEFAULT_API_VERSION = "1.41"
_GONE_POLL_SECONDS = 10.0
_GPU_REFUSALS = ("could not select device driver", "nvidia", "gpu")
_CONNECTION_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout)


def from_settings(settings: Settings) -> LocalDockerProvider:
    """Build the driver from `DOCKER_*` variables, or from the TLS secret when running in AWS."""
    images = {WorkerKind.RENDERER: settings.renderer_image, WorkerKind.ANIM: settings.anim_image}
    environment = dict(os.environ)
    if settings.docker_tls_secret_arn:
        environment.update(_tls_environment_from_secret(settings.docker_tls_secret_arn))
    return LocalDockerProvider(
        connect=lambda: connect(environment),
        images=images,
        network=settings.docker_network,
        worker_port=settings.worker_port,
        host_address=urlparse(environment.get("DOCKER_HOST", "")).hostname,
    )


def connect(environment: Mapping[str, str]) -> docker.APIClient:
    """An Engine API client for `DOCKER_HOST`, verifying the host against its own CA only."""
    host = environment.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    cert_path = environment.get("DOCKER_CERT_PATH")
    tls: docker.tls.TLSConfig | bool = False
    if cert_path or environment.get("DOCKER_TLS_VERIFY"):
        # Always verify against the host's own CA: the Docker CLI's "cert path without
        # DOCKER_TLS_VERIFY means no verification" would hand lease env to any impostor.
        directory = Path(cert_path or Path.home() / ".docker")
        tls = docker.tls.TLSConfig(
            client_cert=(str(directory / "cert.pem"), str(directory / "key.pem")),
            ca_cert=str(directory / "ca.pem"),
            verify=True,
        )
    client = docker.APIClient(
        base_url=host,
        tls=tls,
        version=environment.get("DOCKER_API_VERSION", _DEFAULT_API_VERSION),
        timeout=_API_TIMEOUT_SECONDS,
    )
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE replace the session's `verify` (our private
    # CA) unless the session ignores the environment; corporate machines set both.
    client.trust_env = False
    return client


def _tls_environment_from_secret(secret_arn: str) -> dict[str, str]:
    """Write the Docker TLS material from Secrets Manager to /tmp once per cold start."""
    from aws_lambda_powertools.utilities import parameters

    secret = parameters.get_secret(secret_arn, transform="json", max_age=3600)
    if not isinstance(secret, dict) or not {"ca", "cert", "key"} <= secret.keys():
        raise ProviderUnreachable("the Docker TLS secret must hold JSON keys ca, cert and key")
    directory = Path(tempfile.mkdtemp(prefix="docker-tls-"))
    for name, key in (("ca.pem", "ca"), ("cert.pem", "cert"), ("key.pem", "key")):
        path = directory / name
        path.write_text(str(secret[key]))
        path.chmod(0o600)
    environment = {"DOCKER_CERT_PATH": str(directory), "DOCKER_TLS_VERIFY": "1"}
    if secret.get("host"):
        environment["DOCKER_HOST"] = str(secret["host"])
    return environment


class LocalDockerProvider(Provider):
    """Containers on one Docker Engine, labelled so the reconciler can find them."""

    name = NAME

    def __init__(
        self,
        connect: Callable[[], docker.APIClient],
        images: Mapping[WorkerKind, str],
        network: str,
        worker_port: int,
        host_address: str | None = None,
    ) -> None:
        self._connect = connect
        self._client: docker.APIClient | None = None
        self._client_lock = Lock()
        self._images = dict(images)
        self._network = network
        self._worker_port = worker_port
        self._host_address = host_address or "127.0.0.1"

    def available(self, request: LeaseRequest) -> bool:
        """CPU and single-GPU (`entry`) workers only; `mid`/`high` need a GPU cloud."""
        return request.gpu in (GpuClass.NONE, GpuClass.ENTRY) and bool(self._images.get(request.kind))

    def provision(self, lease: Lease, env: Mapping[str, str]) -> ProvisionedWorker:
        """Create and start the lease's container; remove it again if the start fails."""
        client = self._api()
        name = worker_name(lease.lease_id)
        environment = {**env, "LEASE_ID": lease.lease_id, "LEASE_EXPIRES_AT": format_time(lease.expires_at)}
        host_config: dict[str, Any] = {"network_mode": self._network}
        if lease.gpu == GpuClass.ENTRY:
            host_config["device_requests"] = [DeviceRequest(count=1, capabilities=[["gpu"]])]
        try:
            created = client.create_container(
                image=self._images[lease.kind],
                name=name,
                environment=environment,
                labels={MANAGED_LABEL: "true", LEASE_ID_LABEL: lease.lease_id, KIND_LABEL: lease.kind.value},
                host_config=client.create_host_config(**host_config),
                detach=True,
            )
        except ImageNotFound as error:
            raise ProviderRequestFailed(
                f"worker image {self._images[lease.kind]!r} is not on the Docker host"
            ) from error
        except APIError as error:
            raise ProviderRequestFailed(
                f"the Docker host refused to create the container: {_explain(error)}"
            ) from error
        except _CONNECTION_ERRORS as error:
            # A create that timed out may still have happened on the engine: remove it by name.
            self._remove_quietly(name)
            raise ProviderUnreachable(f"the Docker host cannot be reached: {type(error).__name__}") from error
        container_id = str(created["Id"])
        try:
            client.start(container_id)
        except (APIError, *_CONNECTION_ERRORS) as error:
            self._remove_quietly(container_id)
            explanation = _explain(error) if isinstance(error, APIError) else type(error).__name__
            if lease.gpu == GpuClass.ENTRY and any(word in explanation.lower() for word in _GPU_REFUSALS):
                raise ProviderCapacityError(f"no GPU free on the Docker host: {explanation}") from error
            raise ProviderRequestFailed(f"the container did not start: {explanation}") from error
        return ProvisionedWorker(token=container_id, endpoint=self._endpoint(client, container_id))

    def release(self, lease_id: str, token: str | None) -> None:
        """Stop and remove the container (by id, or by its lease name), then confirm it is gone."""
        client = self._api_for_cleanup()
        reference = token or worker_name(lease_id)
        try:
            client.remove_container(reference, force=True)
        except NotFound:
            return
        except APIError as error:
            if error.status_code != 409:  # 409: a removal is already in progress; confirm below
                raise ProviderRequestFailed(
                    f"the Docker host refused to remove {reference}: {_explain(error)}"
                ) from error
        except _CONNECTION_ERRORS as error:
            raise ProviderRequestFailed(f"the Docker host cannot be reached to remove {reference}") from error
        self._wait_until_gone(client, reference)

    def list_managed(self) -> list[ManagedWorker]:
        """Every container carrying our managed label, running or not."""
        try:
            containers = self._api_for_cleanup().containers(all=True, filters={"label": f"{MANAGED_LABEL}=true"})
        except (APIError, *_CONNECTION_ERRORS) as error:
            raise ProviderRequestFailed("the Docker host cannot list containers") from error
        return [
            ManagedWorker(
                lease_id=container["Labels"].get(LEASE_ID_LABEL, ""),
                token=container["Id"],
                created_at=datetime.fromtimestamp(int(container["Created"]), UTC),
            )
            for container in containers
        ]

    def _api(self) -> docker.APIClient:
        with self._client_lock:
            if self._client is None:
                try:
                    self._client = self._connect()
                except (DockerException, *_CONNECTION_ERRORS) as error:
                    raise ProviderUnreachable(f"the Docker host cannot be reached: {error}") from error
            return self._client

    def _api_for_cleanup(self) -> docker.APIClient:
        # Release and listing never fall over to another provider: an unusable host is a failed
        # call the sweep or reconciler retries, not a capacity problem.
        try:
            return self._api()
        except ProviderUnreachable as error:
            raise ProviderRequestFailed(str(error)) from error

    def _endpoint(self, client: docker.APIClient, container_id: str) -> str | None:
        if self._network == "none":
            return None
        if self._network == "host":
            return f"http://{self._host_address}:{self._worker_port}"
        try:
            networks = client.inspect_container(container_id)["NetworkSettings"]["Networks"]
            address = networks.get(self._network, {}).get("IPAddress")
        except (APIError, KeyError, *_CONNECTION_ERRORS):
            address = None
        return f"http://{address}:{self._worker_port}" if address else None

    def _remove_quietly(self, reference: str) -> None:
        try:
            self._api().remove_container(reference, force=True)
        except (DockerException, *_CONNECTION_ERRORS) as error:
            # Left for the reconciler, which finds it by its managed label.
            logger.warning(
                "could not remove a half-made container", extra={"container": reference, "error": str(error)}
            )

    def _wait_until_gone(self, client: docker.APIClient, reference: str) -> None:
        deadline = time.monotonic() + _GONE_POLL_SECONDS
        delay = 0.05
        while True:
            try:
                client.inspect_container(reference)
            except NotFound:
                return
            except (APIError, *_CONNECTION_ERRORS) as error:
                raise ProviderRequestFailed(f"could not confirm {reference} is gone") from error
            if time.monotonic() > deadline:
                raise ProviderRequestFailed(f"container {reference} is still present after removal")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _explain(error: Exception) -> str:
    if isinstance(error, APIError):
        return str(error.explanation or error)
    return json.dumps(str(error))
