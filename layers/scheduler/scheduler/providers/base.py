"""The provider contract: what a driver does, what it may raise, and what its callers do about it.

A driver is a place that runs workers: one per lease, made by `provision`, removed by `release`,
found again by `list_managed`. Every call that reaches the provider takes the caller's `deadline`
(None: no limit) and gives up by then, raising as below. `tests/providers/test_contract.py` holds
every driver to this (the in-memory reference driver, local-docker on real Docker, RunPod on its fake).

Errors, and the caller's reaction (each rule applied in one place, named in brackets):

| raised                | by `provision`                                 | by any other call                       |
| --------------------- | ---------------------------------------------- | --------------------------------------- |
| ProviderCapacityError | the next provider is tried [policy.attempt]    | — (not raised)                          |
| ProviderUnreachable   | capacity: the next provider is tried           | a failed request, as below              |
| WorkerOutcomeUnknown  | next provider; the lease stays `pending` for   | — (not raised)                          |
|                       | the reconciler, which removes the worker       |                                         |
| ProviderRequestFailed | no other provider is tried: 502 to the caller, | the claim stays; the sweep (or the next |
|                       | the lease ends `failed`                        | reconcile) retries [failed_request]     |

**Unreachable is capacity on acquire, a failed request on release** (and on every listing and
check): a provider that cannot be reached cannot serve, so acquire moves on; but a worker that
could not be removed is still there, so its release is retried until the provider confirms it gone.

Workers carry the lease id (a label, or their name `lease-<id>`), so a lease that never learned
its worker's token can still be released (`release(lease_id, None)`) and an orphan recognised.

Optional capabilities are methods with a default here, and the default says what a provider that
cannot do it means to its callers (`stopped_workers`: none found, the reconciler's listing finds
them later). A new capability (readiness, logs) is added the same way, so existing drivers keep
passing the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from scheduler.deadline import Deadline
from scheduler.models import Lease, LeaseRequest

MANAGED_LABEL = "openalice.scheduler/managed"
LEASE_ID_LABEL = "openalice.scheduler/lease-id"
KIND_LABEL = "openalice.scheduler/kind"
WORKER_NAME_PREFIX = "lease-"


def worker_name(lease_id: str) -> str:
    """The name a lease's container or pod carries, so it can be found without its token."""
    return f"{WORKER_NAME_PREFIX}{lease_id}"


@dataclass(frozen=True)
class ProvisionedWorker:
    """What a provider hands back for a running worker."""

    token: str
    endpoint: str | None
    cost_per_hour: float | None = None


@dataclass(frozen=True)
class ManagedWorker:
    """A worker the provider holds for some lease, as the reconciler sees it."""

    lease_id: str
    token: str
    created_at: datetime
    stopped_reason: str | None = None  # set when the worker no longer runs (exited, dead, stuck restarting)


@dataclass(frozen=True)
class StoppedWorker:
    """A managed worker that no longer runs, and why (recorded as its lease's failure reason)."""

    lease_id: str
    token: str
    reason: str


class ProviderCapacityError(Exception):
    """This provider cannot serve the request now; the policy falls over to the next one."""


class ProviderUnreachable(ProviderCapacityError):
    """The provider's API cannot be reached at all (or not within the caller's deadline)."""


class WorkerOutcomeUnknown(ProviderUnreachable):
    """The call failed after the provider may have made the worker, and its removal could not be confirmed.

    The lease stays `pending`: the reconciler removes any worker carrying its lease id once the
    pending deadline passes, and ends the lease as `failed`.
    """


class ProviderRequestFailed(Exception):
    """The provider refused or failed the call; retrying on another provider won't help."""


@contextmanager
def failed_request() -> Iterator[None]:
    """Around any call but `provision`: an unreachable provider is a failed request (retried later), not capacity."""
    try:
        yield
    except ProviderUnreachable as error:
        raise ProviderRequestFailed(str(error)) from error


class Provider(ABC):
    """A place that runs workers: create one per lease, remove it, list the ones we manage."""

    name: str

    @abstractmethod
    def available(self, request: LeaseRequest) -> bool:
        """Cheap, local check that this provider could serve the request (no network, never raises)."""

    @abstractmethod
    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        """Start a worker for the lease (named/labelled with its id), or raise leaving nothing running behind.

        ProviderCapacityError (ProviderUnreachable included): try the next provider.
        WorkerOutcomeUnknown: as ProviderUnreachable, but a worker may exist; the lease stays pending.
        ProviderRequestFailed: the provider refused; no other provider is tried.
        """

    @abstractmethod
    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        """Remove the lease's worker (by token; without one, every worker carrying the lease id) and return
        only once it is confirmed gone. Gone already, or never made, is fine.

        ProviderRequestFailed (or ProviderUnreachable) when it cannot be removed or confirmed gone: the
        caller keeps its claim and retries later.
        """

    @abstractmethod
    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every worker on this provider that carries our managed marker, running or stopped.

        ProviderRequestFailed (or ProviderUnreachable) if it cannot be listed: the reconciler skips this
        provider for this pass (it must not take an empty answer for "no workers").
        """

    def vouches_for(self, token: str | None) -> bool:
        """Whether the last `list_managed` covered where the worker `token` lives (its absence there is
        evidence). Default: True. A provider of several hosts lists what it can and says here which
        workers it could not see, so the reconciler judges no lease on a host it could not list."""
        return True

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        """Managed workers that no longer run, from one cheap call (the sweep asks every minute).

        Default: none. A provider without such a call, or whose API quota must not be spent on it,
        leaves its stopped workers to the reconciler's listing.
        """
        return []

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        """Why the worker `token` no longer serves its lease (stopped, or gone), else None.

        Default: None (cannot tell cheaply). ProviderRequestFailed (or ProviderUnreachable) if it cannot
        be asked: the read answers the stored lease and leaves the provider alone for a while.
        """
        return None
