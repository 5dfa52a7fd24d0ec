"""How a `local-docker` lease names its worker, shared by the single-host driver and the fleet.

On a fleet (DOCKER_HOSTS) a token is `<host>/<container id>`; on the single DOCKER_HOST it is the bare
container id (and that host is the fleet's host `default`: DOCKER_HOST joins a fleet under that name).
Either driver may meet the other's tokens after the operator switched between the two. Container ids
are random 256-bit values, so the id alone names one worker whichever host it is on.

A lease that never recorded a token (its acquire died, or could not tell whether a worker was made)
may hold the slot of the host it was being placed on (`host#local-docker#<name>` in its held counters):
its release then takes the host-only token `<host>/`, the worker found there by its lease's name.

Light on purpose: the acquire function imports the single-host driver at init, and this with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.providers.base import WorkerHostNotConfigured, worker_name
from scheduler.providers.local_docker import NAME
from scheduler.providers.local_docker.hosts import DEFAULT_HOST_NAME, DockerHostSpec

SEPARATOR = "/"
_SLOT_PREFIX = DockerHostSpec("", "").counter(NAME)


def host_token(host: str, token: str) -> str:
    """The token a fleet lease records: `<host>/<container id>`."""
    return f"{host}{SEPARATOR}{token}"


def split_token(token: str) -> tuple[str | None, str]:
    """(host, container id) of a fleet token; (None, token) for a bare one. A host-only token (`<host>/`)
    has an empty container id: its worker is the lease's, found by name."""
    host, separator, rest = token.partition(SEPARATOR)
    return (host, rest) if separator else (None, token)


def container_id(token: str) -> str:
    """The container a token names, whichever host it names (the reconciler's key for the worker)."""
    return split_token(token)[1]


def placement_token(held: Iterable[str]) -> str | None:
    """The host-only token of the host whose slot a token-less lease holds (None: it holds none)."""
    hosts = sorted(entry.removeprefix(_SLOT_PREFIX) for entry in held if entry.startswith(_SLOT_PREFIX))
    return host_token(hosts[0], "") if hosts else None


def retired_reason(host: str) -> str:
    """Why a worker on a retired host counts as gone (recorded on its lease)."""
    return (
        f"Docker host {host} was retired by the operator (DOCKER_RETIRED_HOSTS): its worker counts as gone,"
        " not confirmed removed by the host"
    )


class SingleHostTokens:
    """The single DOCKER_HOST driver's reading of a token. A bare id is its own; so is a fleet token of host
    `default` (what this host was called in the fleet). Another fleet host's worker is not its to remove,
    read or call gone (WorkerHostNotConfigured), unless the operator retired that host: then it is gone."""

    def __init__(self, retired: Iterable[str] = ()) -> None:
        self.retired = frozenset(retired) - {DEFAULT_HOST_NAME}  # this host itself is served, never retired

    def container(self, lease_id: str, token: str | None) -> str:
        """The container the token names here (no token, or a host-only one: the lease's, by name)."""
        host, container = split_token(token) if token else (DEFAULT_HOST_NAME, "")
        if host is None:
            return container
        if host == DEFAULT_HOST_NAME:
            return container or worker_name(lease_id)
        raise WorkerHostNotConfigured(
            host,
            f"Docker host {host} is not configured (DOCKER_HOSTS is not set); its worker {token} cannot be reached"
            " until the fleet names it again, or DOCKER_RETIRED_HOSTS names it once it is gone",
        )

    def retired_reason(self, token: str | None) -> str | None:
        """Why the worker counts as gone, when its token names a host the operator retired (else None)."""
        host, _ = split_token(token or "")
        return retired_reason(host) if host is not None and host in self.retired else None

    def vouches_for(self, token: str | None) -> bool:
        """This host's listing covers its own workers; a retired host's are gone on the operator's word."""
        host, _ = split_token(token or "")
        return host is None or host == DEFAULT_HOST_NAME or host in self.retired

    def worker_key(self, token: str) -> str:
        """This host's fleet token (`default/<id>`) keys as the bare id its listing names."""
        host, container = split_token(token)
        return container if host == DEFAULT_HOST_NAME else token
