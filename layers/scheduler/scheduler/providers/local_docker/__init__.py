"""The `local-docker` provider: one container per lease on a self-hosted Docker host, over mutual TLS.

This package's settings are read by every function (they are light); the driver (`driver.py`, with
`docker_engine/`, the only code that speaks the Docker Engine API) loads only when first used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.config import API_VERSION, SettingsSection, rate, setting
from scheduler.providers.local_docker.hosts import DEFAULT_HOST_NAME, DockerHostSpec, parse_hosts, parse_retired_hosts

if TYPE_CHECKING:
    from scheduler.providers.base import Provider
    from scheduler.providers.local_docker.fleet import HostSlots
    from scheduler.store import LeaseStore

NAME = "local-docker"


@dataclass(init=False, repr=False, eq=False)  # methods: SettingsSection's
class LocalDockerSettings(SettingsSection):
    """The Docker host, as the docker CLI reads it, and what runs there."""

    docker_host: str | None = setting(None, parameter="DockerHost")
    docker_tls_verify: str | None = setting(None, local="TLS switched on without a cert path (AWS: the TLS secret)")
    docker_cert_path: str | None = setting(None, local="ca.pem, cert.pem, key.pem on disk (AWS: the TLS secret)")
    docker_tls_secret_arn: str | None = setting(None, parameter="DockerTlsSecretArn")
    docker_api_version: str | None = setting(None, parameter="DockerApiVersion", parse=API_VERSION)
    docker_network: str = setting("bridge", parameter="DockerNetwork")
    renderer_image: str = setting("openalice/renderer:latest", parameter="RendererImage")
    anim_image: str = setting("openalice/anim:latest", parameter="AnimImage")
    worker_port: int = setting(8080, parameter="WorkerPort", low=1, high=65535)
    # What one container costs per hour (USD): recorded on its lease, checked against a request's ceiling.
    local_docker_cost_per_hour: float = setting(0, parameter="LocalDockerCostPerHour", parse=rate)
    # A fleet: a JSON list of hosts (`hosts.py`); DOCKER_HOST, when also set, joins it as host "default".
    docker_hosts: tuple[DockerHostSpec, ...] = setting((), parameter="DockerHosts", parse=parse_hosts)
    # Hosts taken out of the fleet for good: their workers count as gone on the operator's word (`fleet.py`).
    docker_retired_hosts: tuple[str, ...] = setting((), parameter="DockerRetiredHosts", parse=parse_retired_hosts)

    def fleet(self) -> tuple[DockerHostSpec, ...]:
        """The hosts of the fleet (none: the single host of DOCKER_HOST, as before)."""
        if not self.docker_hosts:
            return ()
        if self.docker_host and all(spec.name != DEFAULT_HOST_NAME for spec in self.docker_hosts):
            single = DockerHostSpec(DEFAULT_HOST_NAME, self.docker_host, self.docker_cert_path, gpus=("none", "entry"))
            return (*self.docker_hosts, single)
        return self.docker_hosts

    def docker_environment(self) -> dict[str, str]:
        """The DOCKER_* variables, as the docker CLI (and `docker_engine.client.connect`) take them."""
        chosen = {
            "DOCKER_HOST": self.docker_host,
            "DOCKER_TLS_VERIFY": self.docker_tls_verify,
            "DOCKER_CERT_PATH": self.docker_cert_path,
        }
        return {name: value for name, value in chosen.items() if value}


SETTINGS = LocalDockerSettings
# GET /v1/lease/{id} may ask this provider whether a lease's worker still runs: one cheap call per read.
CHECKED_ON_READ = True


# `build` takes the lease store: a fleet's per-host caps are counters there, as atomic as provider caps.
USES_STORE = True


def build(settings: LocalDockerSettings, store: LeaseStore | None = None) -> Provider:
    """The driver (imports the Docker SDK): one host, or a fleet when DOCKER_HOSTS is set."""
    from scheduler.providers.local_docker.factory import fleet_from_settings, from_settings

    if not settings.docker_hosts:
        return from_settings(settings)
    slots: HostSlots | None = None
    if store is not None:
        from scheduler.store.host_slots import StoreHostSlots

        slots = StoreHostSlots(store)
    return fleet_from_settings(settings, slots)
