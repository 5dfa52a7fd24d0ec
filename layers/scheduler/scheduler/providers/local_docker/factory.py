"""Building `local-docker` from its settings: the single DOCKER_HOST driver, or a fleet (DOCKER_HOSTS), each host
over mutual TLS from its cert path, or from the TLS secret when running in AWS."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from scheduler.models import WorkerKind
from scheduler.providers.base import Provider, ProviderUnreachable
from scheduler.providers.docker_engine.client import EngineClient, connect
from scheduler.providers.local_docker import LocalDockerSettings
from scheduler.providers.local_docker.driver import LocalDockerProvider
from scheduler.providers.local_docker.hosts import DockerHostSpec

if TYPE_CHECKING:  # the fleet loads when one is configured
    from scheduler.providers.local_docker.fleet import DockerFleet, HostSlots


def from_settings(settings: LocalDockerSettings) -> LocalDockerProvider:
    """Build the driver from the `DOCKER_*` settings, or from the TLS secret when running in AWS."""
    images = {WorkerKind.RENDERER: settings.renderer_image, WorkerKind.ANIM: settings.anim_image}
    environment = settings.docker_environment()
    if settings.docker_tls_secret_arn:
        environment.update(_tls_environment_from_secret(settings.docker_tls_secret_arn))
    return LocalDockerProvider(
        connect=lambda: connect(environment, api_version=settings.docker_api_version),
        images=images,
        network=settings.docker_network,
        worker_port=settings.worker_port,
        host_address=urlparse(environment.get("DOCKER_HOST", "")).hostname,
        cost_per_hour=settings.local_docker_cost_per_hour,
        retired=settings.docker_retired_hosts,
    )


def fleet_from_settings(settings: LocalDockerSettings, slots: HostSlots | None = None) -> DockerFleet:
    """A fleet: one driver per DOCKER_HOSTS entry (TLS from its cert_path, or from the secret in AWS)."""
    from scheduler.providers.local_docker.fleet import DockerFleet

    images = {WorkerKind.RENDERER: settings.renderer_image, WorkerKind.ANIM: settings.anim_image}
    members: list[tuple[DockerHostSpec, Provider]] = []
    for spec in settings.fleet():
        environment = spec.docker_environment()
        if settings.docker_tls_secret_arn and not spec.cert_path:
            environment.update(_tls_environment_from_secret(settings.docker_tls_secret_arn, host=spec.name))
            environment["DOCKER_HOST"] = spec.host

        def connect_to(environment: dict[str, str] = environment) -> EngineClient:
            return connect(environment, api_version=settings.docker_api_version)

        member = LocalDockerProvider(
            connect=connect_to,
            images=images,
            network=settings.docker_network,
            worker_port=settings.worker_port,
            host_address=urlparse(spec.host).hostname,
            cost_per_hour=settings.local_docker_cost_per_hour,
        )
        members.append((spec, member))
    return DockerFleet(members, slots, retired=settings.docker_retired_hosts)


def _tls_environment_from_secret(secret_arn: str, host: str | None = None) -> dict[str, str]:
    """Write the Docker TLS material from Secrets Manager to /tmp once per cold start.

    For a fleet host, its own PEMs under `hosts.<name>` if the secret has them, else the shared ones.
    """
    from aws_lambda_powertools.utilities import parameters

    secret = parameters.get_secret(secret_arn, transform="json", max_age=3600)
    if host is not None and isinstance(secret, dict) and isinstance(secret.get("hosts"), dict):
        secret = secret["hosts"].get(host) or secret
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
