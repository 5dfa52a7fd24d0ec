"""Removing a lease's container and confirming it is gone (the release of a `local-docker` worker).

Loaded by the driver on its first release, not at an acquire's cold start.
"""

from __future__ import annotations

import time

from docker.errors import APIError, NotFound

from scheduler.deadline import Deadline
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.docker_engine.client import EngineClient, call_failed
from scheduler.providers.docker_engine.failures import CONNECTION_ERRORS, describe_api_error

_GONE_POLL_SECONDS = 10.0


def remove_and_confirm(client: EngineClient, reference: str, deadline: Deadline) -> None:
    """Stop and remove the container, then poll until the engine no longer knows it."""
    with client.within(deadline):
        try:
            client.remove_container(reference, force=True)
        except NotFound:
            return
        except APIError as error:
            if error.status_code != 409:  # 409: a removal is already in progress; confirm below
                raise ProviderRequestFailed(
                    f"the Docker host refused to remove {reference}: {describe_api_error(error)}"
                ) from error
        except CONNECTION_ERRORS as error:
            raise ProviderRequestFailed(f"cannot remove {reference}: {call_failed(client, error)}") from error
        _wait_until_gone(client, reference, deadline)


def _wait_until_gone(client: EngineClient, reference: str, deadline: Deadline) -> None:
    give_up_at = deadline.sooner(_GONE_POLL_SECONDS)
    delay = 0.05
    while True:
        try:
            client.inspect_container(reference)
        except NotFound:
            return
        except (APIError, *CONNECTION_ERRORS) as error:
            raise ProviderRequestFailed(
                f"could not confirm {reference} is gone: {call_failed(client, error)}"
            ) from error
        if give_up_at.expired:
            raise ProviderRequestFailed(f"container {reference} is still present after removal")
        time.sleep(min(delay, give_up_at.remaining()))
        delay = min(delay * 2, 1.0)
