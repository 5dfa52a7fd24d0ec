"""The `local-docker` driver: containers on one Docker Engine, labelled so the reconciler can find them.

This module (with `docker_engine/`, how it connects) is the only code that speaks the Docker Engine API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from threading import Lock
from typing import TYPE_CHECKING, Any

import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest

from scheduler.costs import money
from scheduler.deadline import Deadline, or_never
from scheduler.models import GpuClass, Lease, WorkerKind, format_time
from scheduler.observability.log import Logger
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
from scheduler.providers.docker_engine.client import EngineClient, call_failed, negotiate, renegotiate_if_refused
from scheduler.providers.docker_engine.failures import (
    CONNECTION_ERRORS,
    describe,
    describe_api_error,
    is_version_refusal,
)
from scheduler.providers.docker_engine.tls import TlsMaterialError
from scheduler.providers.local_docker import NAME
from scheduler.providers.local_docker.states import STOPPED_STATES, is_stopped, readiness_from_state, reason_from_state
from scheduler.providers.local_docker.tokens import SingleHostTokens, placement_token

if TYPE_CHECKING:  # the acquire function imports this driver at init: log reading loads when used
    from scheduler.request_models import LeaseRequest
    from scheduler.worker_logs import LogLine, LogQuery

logger = Logger(child=True)

_GONE_POLL_SECONDS = 10.0
# Removing a half-made container needs a round trip or two; with less time left it is the reconciler's.
_CLEANUP_MIN_SECONDS = 1.0
_GPU_REFUSALS = ("could not select device driver", "nvidia", "gpu")


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
        retired: Iterable[str] = (),
    ) -> None:
        self._connect = connect
        self._client: EngineClient | None = None
        self._client_lock = Lock()
        self._images = dict(images)
        self._network = network
        self._worker_port = worker_port
        self._host_address = host_address or "127.0.0.1"
        self._cost_per_hour = float(cost_per_hour)
        self._tokens = SingleHostTokens(retired)

    def available(self, request: LeaseRequest) -> bool:
        """CPU and single-GPU (`entry`) workers only; `mid`/`high` need a GPU cloud."""
        return request.gpu in (GpuClass.NONE, GpuClass.ENTRY) and bool(self._images.get(request.kind))

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        """Create and start the lease's container; remove it again if the start fails."""
        if above_ceiling(self._cost_per_hour, lease):
            raise PriceAboveCeiling(
                f"a container costs {money(self._cost_per_hour)} USD/h (LOCAL_DOCKER_COST_PER_HOUR),"
                f" above the request's max_cost_per_hour {money(lease.max_cost_per_hour or 0)}",
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
                self._note_version_refusal(client, error)
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

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> str | None:
        """Stop and remove the container (by id, or by its lease name), then confirm it is gone."""
        retired = self._tokens.retired_reason(token)
        if retired is not None:
            logger.warning("worker on a retired Docker host counted as gone", extra={"token": token})
            return retired
        deadline = or_never(deadline)
        reference = self._tokens.container(lease_id, token)
        client = self._api_for_cleanup(deadline)
        with client.within(deadline):
            try:
                client.remove_container(reference, force=True)
            except NotFound:
                return None
            except APIError as error:
                if error.status_code != 409:  # 409: a removal is already in progress; confirm below
                    raise ProviderRequestFailed(
                        f"the Docker host refused to remove {reference}: {describe_api_error(error)}"
                    ) from error
            except CONNECTION_ERRORS as error:
                raise ProviderRequestFailed(f"cannot remove {reference}: {self._describe(client, error)}") from error
            self._wait_until_gone(client, reference, deadline)
        return None

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every container carrying our managed label, running or not (stopped ones with the reason)."""
        deadline = or_never(deadline)
        client = self._api_for_cleanup(deadline)
        containers = self._containers(client, deadline, {"label": f"{MANAGED_LABEL}=true"})
        with client.within(deadline):
            return [
                ManagedWorker(
                    lease_id=container["Labels"].get(LEASE_ID_LABEL, ""),
                    token=container["Id"],
                    created_at=datetime.fromtimestamp(int(container["Created"]), UTC),
                    stopped_reason=self._reason_for(client, container) if is_stopped(container) else None,
                )
                for container in containers
            ]

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        """Managed containers that exited, died or are stuck restarting: one filtered listing."""
        deadline = or_never(deadline)
        client = self._api_for_cleanup(deadline)
        containers = self._containers(
            client, deadline, {"label": f"{MANAGED_LABEL}=true", "status": list(STOPPED_STATES)}
        )
        with client.within(deadline):
            return [
                StoppedWorker(
                    lease_id=container["Labels"].get(LEASE_ID_LABEL, ""),
                    token=container["Id"],
                    reason=self._reason_for(client, container),
                )
                for container in containers
            ]

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        """One inspect: why the container no longer serves (stopped or gone), or None while it runs (or while it
        cannot tell: a worker on a Docker host that is not configured)."""
        retired = self._tokens.retired_reason(token)
        if retired is not None:
            return retired
        deadline = or_never(deadline)
        try:
            token = self._tokens.container(lease_id, token)
        except WorkerHostNotConfigured:
            return None
        client = self._api_for_cleanup(deadline)
        with client.within(deadline):
            try:
                state = client.inspect_container(token)["State"]
            except NotFound:
                return "the worker container no longer exists on the Docker host (removed behind the service's back)"
            except (APIError, *CONNECTION_ERRORS) as error:
                raise ProviderRequestFailed(f"cannot inspect {token}: {self._describe(client, error)}") from error
        return reason_from_state(state)

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        """One inspect: ready when running (and healthy, if the image has a HEALTHCHECK); failed if stopped or gone."""
        retired = self._tokens.retired_reason(token)
        if retired is not None:
            return Readiness.failed(retired)
        deadline = or_never(deadline)
        token = self._tokens.container(lease_id, token)
        client = self._api_for_cleanup(deadline)
        with client.within(deadline):
            try:
                state = client.inspect_container(token)["State"]
            except NotFound:
                return Readiness.failed("the worker container no longer exists on the Docker host")
            except (APIError, *CONNECTION_ERRORS) as error:
                raise ProviderRequestFailed(f"cannot inspect {token}: {self._describe(client, error)}") from error
        return readiness_from_state(state)

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        """The container's stdout and stderr (by id, or by its lease name); WorkerGone once it is removed, or
        while the engine removes it (409: it serves no logs of a container marked for removal, or dead)."""
        retired = self._tokens.retired_reason(token)
        if retired is not None:
            raise WorkerGone(retired)
        deadline = or_never(deadline)
        reference = self._tokens.container(lease_id, token)
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
                    f"cannot read the logs of {reference}: {self._describe(client, error)}"
                ) from error
            except requests.exceptions.RequestException as error:
                raise ProviderRequestFailed(
                    f"cannot read the logs of {reference}: {self._describe(client, error)}"
                ) from error

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        """One inspect per worker. A worker on another host (a fleet token from a host that is not configured)
        is left unanswered, never failing the others; the first failure to ask the engine ends the pass
        (the rest unanswered), and fails it when nothing was answered yet."""
        answered: dict[str, Readiness] = {}
        for token, lease_id in workers.items():
            try:
                answered[token] = self.readiness(lease_id, token, deadline)
            except WorkerHostNotConfigured:
                continue
            except ProviderRequestFailed:
                if not answered:
                    raise
                break
        return answered

    def vouches_for(self, token: str | None) -> bool:
        return self._tokens.vouches_for(token)

    def worker_key(self, token: str) -> str:
        return self._tokens.worker_key(token)

    def placement_token(self, held: tuple[str, ...]) -> str | None:
        """A token-less lease placed on a fleet host (while DOCKER_HOSTS was set) is that host's to confirm."""
        return placement_token(held)

    # --- internals -------------------------------------------------------------------------------

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

    def _containers(self, client: EngineClient, deadline: Deadline, filters: dict[str, Any]) -> list[dict[str, Any]]:
        with client.within(deadline):
            try:
                return list(client.containers(all=True, filters=filters))
            except (APIError, *CONNECTION_ERRORS) as error:
                if isinstance(error, APIError):
                    self._note_version_refusal(client, error)
                raise ProviderRequestFailed(
                    f"the Docker host cannot list containers: {self._describe(client, error)}"
                ) from error

    def _reason_for(self, client: EngineClient, container: Mapping[str, Any]) -> str:
        """The stop reason from an inspect (exit code, OOM kill, time), else from the listing's summary."""
        try:
            reason = reason_from_state(client.inspect_container(container["Id"])["State"])
        except NotFound:
            return "the worker container no longer exists on the Docker host (removed behind the service's back)"
        except (APIError, *CONNECTION_ERRORS):
            reason = None
        return reason or f"the worker container is {container.get('State', 'stopped')}: {container.get('Status', '')}"

    def _give_up(self, client: EngineClient, reference: str, deadline: Deadline, error: Exception) -> None:
        """After a lost create/start: remove what may have been made, or leave it to the reconciler."""
        description = self._describe(client, error)
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
                extra={"container": reference, "error": self._describe(client, error)},
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

    def _wait_until_gone(self, client: EngineClient, reference: str, deadline: Deadline) -> None:
        give_up_at = deadline.sooner(_GONE_POLL_SECONDS)
        delay = 0.05
        while True:
            try:
                client.inspect_container(reference)
            except NotFound:
                return
            except (APIError, *CONNECTION_ERRORS) as error:
                raise ProviderRequestFailed(
                    f"could not confirm {reference} is gone: {self._describe(client, error)}"
                ) from error
            if give_up_at.expired:
                raise ProviderRequestFailed(f"container {reference} is still present after removal")
            time.sleep(min(delay, give_up_at.remaining()))
            delay = min(delay * 2, 1.0)

    def _unreachable(self, client: EngineClient, error: Exception) -> ProviderUnreachable:
        return ProviderUnreachable(self._describe(client, error))

    def _describe(self, client: EngineClient, error: BaseException) -> str:
        return call_failed(client, error)

    def _note_version_refusal(self, client: EngineClient, error: APIError) -> None:
        renegotiate_if_refused(client, error)
