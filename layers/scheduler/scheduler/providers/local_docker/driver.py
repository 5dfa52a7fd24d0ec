"""The `local-docker` driver: containers on one Docker Engine, labelled so the reconciler can find them.

This package (with `docker_engine/`, how it connects) is the only code that speaks the Docker Engine API.
Here: the driver built from its settings, and a container made for a lease. What the engine says of the
containers (`inspection.py`), their removal (`removal.py`) and their logs (`logs.py`) load when first used.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from threading import Lock
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import requests
from aws_lambda_powertools import Logger
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest

from scheduler.deadline import Deadline, or_never
from scheduler.models import GpuClass, Lease, WorkerKind, format_time
from scheduler.providers.base import (
    KIND_LABEL,
    LEASE_ID_LABEL,
    MANAGED_LABEL,
    ManagedWorker,
    PriceAboveCeiling,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    Readiness,
    ReadinessState,
    StoppedWorker,
    WorkerGone,
    WorkerHostNotConfigured,
    WorkerOutcomeUnknown,
    above_ceiling,
    worker_name,
)
from scheduler.providers.docker_engine.api_versions import ApiVersionMismatch
from scheduler.providers.docker_engine.client import (
    EngineClient,
    call_failed,
    connect,
    negotiate,
    renegotiate_if_refused,
)
from scheduler.providers.docker_engine.failures import (
    CONNECTION_ERRORS,
    describe,
    describe_api_error,
    is_version_refusal,
)
from scheduler.providers.docker_engine.tls import TlsMaterialError
from scheduler.providers.local_docker import NAME, LocalDockerSettings
from scheduler.providers.local_docker.hosts import DEFAULT_HOST_NAME, DockerHostSpec
from scheduler.providers.local_docker.states import readiness_from_state

if TYPE_CHECKING:  # the acquire function imports this driver at init: the fleet and log reading load when used
    from scheduler.providers.local_docker.fleet import DockerFleet, HostSlots
    from scheduler.request_models import LeaseRequest
    from scheduler.worker_logs import LogLine, LogQuery

logger = Logger(child=True)

# Removing a half-made container needs a round trip or two; with less time left it is the reconciler's.
_CLEANUP_MIN_SECONDS = 1.0
_GPU_REFUSALS = ("could not select device driver", "nvidia", "gpu")


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


class LocalDockerProvider(Provider):
    """Containers on one Docker Engine, labelled so the reconciler can find them."""

    name = NAME

    def __init__(
        self,
        connect: Callable[[], EngineClient],
        images: Mapping[WorkerKind, str],
        network: str,
        worker_port: int,
        host_address: str | None = None,
        cost_per_hour: float = 0.0,
    ) -> None:
        self._connect = connect
        self._client: EngineClient | None = None
        self._client_lock = Lock()
        self._images = dict(images)
        self._network = network
        self._worker_port = worker_port
        self._host_address = host_address or "127.0.0.1"
        self._cost_per_hour = float(cost_per_hour)

    def available(self, request: LeaseRequest) -> bool:
        """CPU and single-GPU (`entry`) workers only; `mid`/`high` need a GPU cloud."""
        return request.gpu in (GpuClass.NONE, GpuClass.ENTRY) and bool(self._images.get(request.kind))

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        """Create and start the lease's container; remove it again if the start fails."""
        if above_ceiling(self._cost_per_hour, lease):
            raise PriceAboveCeiling(
                f"a container costs {self._cost_per_hour:g} USD/h (LOCAL_DOCKER_COST_PER_HOUR),"
                f" above the request's max_cost_per_hour {lease.max_cost_per_hour:g}",
                self._cost_per_hour,
            )
        deadline = or_never(deadline)
        client = self._api(deadline)
        name = worker_name(lease.lease_id)
        image = self._images[lease.kind]
        environment = {**env, "LEASE_ID": lease.lease_id, "LEASE_EXPIRES_AT": format_time(lease.expires_at)}
        host_config: dict[str, Any] = {"network_mode": self._network}
        if lease.gpu == GpuClass.ENTRY:
            host_config["device_requests"] = [DeviceRequest(count=1, capabilities=[["gpu"]])]
        with client.within(deadline):
            try:
                created = client.create_container(
                    image=image,
                    name=name,
                    environment=environment,
                    labels={MANAGED_LABEL: "true", LEASE_ID_LABEL: lease.lease_id, KIND_LABEL: lease.kind.value},
                    host_config=client.create_host_config(**host_config),
                    detach=True,
                )
            except ImageNotFound as error:
                raise ProviderRequestFailed(
                    f"image missing: the worker image {image!r} is not on the Docker host at {client.host}"
                    " (docker pull or docker load it there, or set RENDERER_IMAGE/ANIM_IMAGE)"
                ) from error
            except APIError as error:
                renegotiate_if_refused(client, error)
                if is_version_refusal(error):
                    raise ProviderUnreachable(describe_api_error(error)) from error
                raise ProviderRequestFailed(
                    f"the Docker host refused to create the container: {describe_api_error(error)}"
                ) from error
            except CONNECTION_ERRORS as error:
                # A create that timed out may still have happened on the engine: remove it by name.
                self._give_up(client, name, deadline, error)
            container_id = str(created["Id"])
            try:
                client.start(container_id)
            except APIError as error:
                self._remove_quietly(client, container_id, deadline)
                explanation = describe_api_error(error)
                if lease.gpu == GpuClass.ENTRY and any(word in explanation.lower() for word in _GPU_REFUSALS):
                    raise ProviderCapacityError(f"GPU not available on the Docker host: {explanation}") from error
                raise ProviderRequestFailed(f"the container did not start: {explanation}") from error
            except CONNECTION_ERRORS as error:
                self._give_up(client, container_id, deadline, error)
            ready = self._ready_at_start(client, container_id)
            return ProvisionedWorker(
                token=container_id,
                endpoint=self._endpoint(client, container_id),
                cost_per_hour=self._cost_per_hour,
                ready=ready,
            )

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        """Every container costs LOCAL_DOCKER_COST_PER_HOUR."""
        return self._cost_per_hour

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        """Stop and remove the container (by id, or by its lease name), then confirm it is gone."""
        from scheduler.providers.local_docker.removal import remove_and_confirm

        deadline = or_never(deadline)
        reference = self._container(lease_id, token)
        remove_and_confirm(self._api_for_cleanup(deadline), reference, deadline)

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every container carrying our managed label, running or not (stopped ones with the reason)."""
        from scheduler.providers.local_docker.inspection import managed_workers

        deadline = or_never(deadline)
        return managed_workers(self._api_for_cleanup(deadline), deadline)

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        """Managed containers that exited, died or are stuck restarting: one filtered listing."""
        from scheduler.providers.local_docker.inspection import stopped_workers

        deadline = or_never(deadline)
        return stopped_workers(self._api_for_cleanup(deadline), deadline)

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        """One inspect: why the container no longer serves (stopped or gone), or None while it runs (or while it
        cannot tell: a worker on a Docker host that is not configured)."""
        from scheduler.providers.local_docker.inspection import stopped_reason

        deadline = or_never(deadline)
        try:
            reference = self._container(lease_id, token)
        except WorkerHostNotConfigured:
            return None
        return stopped_reason(self._api_for_cleanup(deadline), reference, deadline)

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        """One inspect: ready when running (and healthy, if the image has a HEALTHCHECK); failed if stopped or gone."""
        from scheduler.providers.local_docker.inspection import readiness

        deadline = or_never(deadline)
        reference = self._container(lease_id, token)
        return readiness(self._api_for_cleanup(deadline), reference, deadline)

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        """The container's stdout and stderr (by id, or by its lease name); WorkerGone once it is removed, or
        while the engine removes it (409: it serves no logs of a container marked for removal, or dead)."""
        deadline = or_never(deadline)
        reference = self._container(lease_id, token)
        client = self._api_for_cleanup(deadline)
        with client.within(deadline):
            try:
                from scheduler.providers.local_docker.logs import read_container_logs

                return read_container_logs(client, reference, query, deadline)
            except NotFound as error:
                raise WorkerGone(f"the container {reference} no longer exists on the Docker host") from error
            except APIError as error:
                if error.status_code == 409:
                    raise WorkerGone(
                        f"the container {reference} is being removed: {describe_api_error(error)}"
                    ) from error
                raise ProviderRequestFailed(
                    f"cannot read the logs of {reference}: {call_failed(client, error)}"
                ) from error
            except requests.exceptions.RequestException as error:
                raise ProviderRequestFailed(
                    f"cannot read the logs of {reference}: {call_failed(client, error)}"
                ) from error

    def vouches_for(self, token: str | None) -> bool:
        """Not for a fleet token (`<host>/<id>`, recorded while DOCKER_HOSTS was set): the listing's bare ids
        never match it, so its absence from them says nothing."""
        return "/" not in (token or "")

    # --- internals -------------------------------------------------------------------------------

    def _container(self, lease_id: str, token: str | None) -> str:
        """The container a token names here (no token: the lease's by name). A fleet token, recorded while
        DOCKER_HOSTS was set, is this host's under the name DOCKER_HOST had in the fleet; a worker on any other
        host is not this host's to remove, read or call gone (WorkerHostNotConfigured)."""
        if token is None:
            return worker_name(lease_id)
        host, separator, container = token.partition("/")
        if not separator:
            return token
        if host == DEFAULT_HOST_NAME:
            return container
        raise WorkerHostNotConfigured(
            host,
            f"Docker host {host} is not configured (DOCKER_HOSTS is not set); its worker {token} cannot be reached"
            " until the fleet names it again, or names it in DOCKER_RETIRED_HOSTS once it is gone",
        )

    def _ready_at_start(self, client: EngineClient, container_id: str) -> bool:
        """Right after start: ready unless the image's HEALTHCHECK has not passed yet (or the inspect failed:
        then the sweep or a read asks again)."""
        try:
            state = client.inspect_container(container_id)["State"]
        except (APIError, KeyError, *CONNECTION_ERRORS):
            return False
        return readiness_from_state(state).state is ReadinessState.READY

    def _api(self, deadline: Deadline) -> EngineClient:
        """The engine client, its API version negotiated (one /version per cold start and host)."""
        with self._client_lock:
            if self._client is None:
                try:
                    self._client = self._connect()
                except (TlsMaterialError, DockerException) as error:
                    raise ProviderUnreachable(f"the Docker host cannot be reached: {describe(error, '')}") from error
            client = self._client
        if not client.version_settled:
            with client.within(deadline):
                try:
                    version = negotiate(client)
                except (ApiVersionMismatch, APIError, *CONNECTION_ERRORS) as error:
                    raise self._unreachable(client, error) from error
            logger.info("Docker Engine API version chosen", extra={"host": client.host, "api_version": version})
        return client

    def _api_for_cleanup(self, deadline: Deadline) -> EngineClient:
        # Release and listing never fall over to another provider: an unusable host is a failed
        # call the sweep or reconciler retries, not a capacity problem.
        try:
            return self._api(deadline)
        except ProviderUnreachable as error:
            raise ProviderRequestFailed(str(error)) from error

    def _give_up(self, client: EngineClient, reference: str, deadline: Deadline, error: Exception) -> None:
        """After a lost create/start: remove what may have been made, or leave it to the reconciler."""
        description = call_failed(client, error)
        if not self._remove_quietly(client, reference, deadline):
            raise WorkerOutcomeUnknown(
                f"{description}; a container may have been made and is left to the reconciler"
            ) from error
        raise ProviderUnreachable(description) from error

    def _remove_quietly(self, client: EngineClient, reference: str, deadline: Deadline) -> bool:
        """Remove a half-made container; False when that could not be confirmed (too little time left, or an error)."""
        if deadline.remaining() < _CLEANUP_MIN_SECONDS:
            logger.warning("no time left to remove a half-made container", extra={"container": reference})
            return False
        try:
            client.remove_container(reference, force=True)
        except NotFound:
            return True
        except (DockerException, *CONNECTION_ERRORS) as error:
            # Left for the reconciler, which finds it by its managed label.
            logger.warning(
                "could not remove a half-made container",
                extra={"container": reference, "error": call_failed(client, error)},
            )
            return False
        return True

    def _endpoint(self, client: EngineClient, container_id: str) -> str | None:
        if self._network == "none":
            return None
        if self._network == "host":
            return f"http://{self._host_address}:{self._worker_port}"
        try:
            networks = client.inspect_container(container_id)["NetworkSettings"]["Networks"]
            address = networks.get(self._network, {}).get("IPAddress")
        except (APIError, KeyError, *CONNECTION_ERRORS):
            address = None
        return f"http://{address}:{self._worker_port}" if address else None

    def _unreachable(self, client: EngineClient, error: Exception) -> ProviderUnreachable:
        return ProviderUnreachable(call_failed(client, error))
