"""What the engine says of the driver's containers: the managed listing, why one stopped, whether one is ready.

Loaded by the driver when first asked (the sweep, the reconciler, a read's check), not at an acquire's cold start.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from docker.errors import APIError, NotFound

from scheduler.deadline import Deadline
from scheduler.providers.base import (
    LEASE_ID_LABEL,
    MANAGED_LABEL,
    ManagedWorker,
    ProviderRequestFailed,
    Readiness,
    StoppedWorker,
)
from scheduler.providers.docker_engine.client import EngineClient, call_failed, renegotiate_if_refused
from scheduler.providers.docker_engine.failures import CONNECTION_ERRORS
from scheduler.providers.local_docker.states import STOPPED_STATES, is_stopped, readiness_from_state, reason_from_state

_GONE = "the worker container no longer exists on the Docker host"
_REMOVED_BEHIND_OUR_BACK = f"{_GONE} (removed behind the service's back)"


def managed_workers(client: EngineClient, deadline: Deadline) -> list[ManagedWorker]:
    """Every container carrying the managed label, running or not (stopped ones with the reason)."""
    containers = _containers(client, deadline, {"label": f"{MANAGED_LABEL}=true"})
    with client.within(deadline):
        return [
            ManagedWorker(
                lease_id=container["Labels"].get(LEASE_ID_LABEL, ""),
                token=container["Id"],
                created_at=datetime.fromtimestamp(int(container["Created"]), UTC),
                stopped_reason=_reason_for(client, container) if is_stopped(container) else None,
            )
            for container in containers
        ]


def stopped_workers(client: EngineClient, deadline: Deadline) -> list[StoppedWorker]:
    """Managed containers that exited, died or are stuck restarting: one filtered listing."""
    containers = _containers(client, deadline, {"label": f"{MANAGED_LABEL}=true", "status": list(STOPPED_STATES)})
    with client.within(deadline):
        return [
            StoppedWorker(
                lease_id=container["Labels"].get(LEASE_ID_LABEL, ""),
                token=container["Id"],
                reason=_reason_for(client, container),
            )
            for container in containers
        ]


def stopped_reason(client: EngineClient, reference: str, deadline: Deadline) -> str | None:
    """One inspect: why the container no longer serves (stopped or gone), or None while it runs."""
    with client.within(deadline):
        try:
            state = client.inspect_container(reference)["State"]
        except NotFound:
            return _REMOVED_BEHIND_OUR_BACK
        except (APIError, *CONNECTION_ERRORS) as error:
            raise ProviderRequestFailed(f"cannot inspect {reference}: {call_failed(client, error)}") from error
    return reason_from_state(state)


def readiness(client: EngineClient, reference: str, deadline: Deadline) -> Readiness:
    """One inspect: ready when running (and healthy, if the image has a HEALTHCHECK); failed if stopped or gone."""
    with client.within(deadline):
        try:
            state = client.inspect_container(reference)["State"]
        except NotFound:
            return Readiness.failed(_GONE)
        except (APIError, *CONNECTION_ERRORS) as error:
            raise ProviderRequestFailed(f"cannot inspect {reference}: {call_failed(client, error)}") from error
    return readiness_from_state(state)


def _containers(client: EngineClient, deadline: Deadline, filters: dict[str, Any]) -> list[dict[str, Any]]:
    with client.within(deadline):
        try:
            return list(client.containers(all=True, filters=filters))
        except (APIError, *CONNECTION_ERRORS) as error:
            if isinstance(error, APIError):
                renegotiate_if_refused(client, error)
            raise ProviderRequestFailed(
                f"the Docker host cannot list containers: {call_failed(client, error)}"
            ) from error


def _reason_for(client: EngineClient, container: Mapping[str, Any]) -> str:
    """The stop reason from an inspect (exit code, OOM kill, time), else from the listing's summary."""
    try:
        reason = reason_from_state(client.inspect_container(container["Id"])["State"])
    except NotFound:
        return _REMOVED_BEHIND_OUR_BACK
    except (APIError, *CONNECTION_ERRORS):
        reason = None
    return reason or f"the worker container is {container.get('State', 'stopped')}: {container.get('Status', '')}"
