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
them later; `readiness`: workers are usable once provisioned; `place_counters`: no counters of its
own, so nothing to report or repair). A new capability (logs) is added the same way, so existing
drivers keep passing the contract. What a driver knows only about one worker rides on
`ProvisionedWorker`, with a default that means the same: `ends_at` (None: the worker runs until it is
released) is when the provider itself ends the worker, whatever its lease — a Modal Sandbox's timeout,
fixed when it is made. The lease records it and is never renewed past it (409 `conflict` naming it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from scheduler.deadline import Deadline
from scheduler.models import Lease

if TYPE_CHECKING:  # only the acquire path builds one; only the logs route reads logs
    from scheduler.request_models import LeaseRequest
    from scheduler.worker_logs import LogLine, LogQuery

MANAGED_LABEL = "openalice.scheduler/managed"
LEASE_ID_LABEL = "openalice.scheduler/lease-id"
KIND_LABEL = "openalice.scheduler/kind"
WORKER_NAME_PREFIX = "lease-"


def worker_name(lease_id: str) -> str:
    """The name a lease's container or pod carries, so it can be found without its token."""
    return f"{WORKER_NAME_PREFIX}{lease_id}"


class ProvisionedWorker(NamedTuple):
    """What a provider hands back for a running worker."""

    token: str
    endpoint: str | None
    cost_per_hour: float | None = None
    ready: bool = True  # usable at once; False: it boots (its lease reads `starting` until `readiness` says ready)
    # `held_counters` entries the provider itself took for the lease (a fleet host's slot): acquire keeps them
    # in every later write of the lease's held set, so whatever ends the lease gives them back.
    held: tuple[str, ...] = ()
    # When the provider will end the worker on its own, whatever the lease (at the earliest; never before the
    # lease's expiry at acquire): a renewal may not carry the lease past it. None: it runs until released.
    ends_at: datetime | None = None


class PlaceCounter:
    """A live-lease counter a provider keeps in the lease store for one place of its own (a Docker host of a
    fleet): taken with a lease placed there, like the provider's own slot, and given back when the lease ends.

    A plain class, not a NamedTuple: every function loads this module, and a NamedTuple costs its cold start.
    """

    __slots__ = ("counter", "maximum", "place")

    def __init__(self, place: str, counter: str, maximum: int | None = None) -> None:
        self.place = place  # the place's name (the `host` dimension of HostLeases)
        self.counter = counter  # the counter's name in the lease store
        self.maximum = maximum  # the place's cap on live leases, if it has one

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlaceCounter):
            return NotImplemented
        return (self.place, self.counter, self.maximum) == (other.place, other.counter, other.maximum)

    def __repr__(self) -> str:
        return f"PlaceCounter({self.place!r}, {self.counter!r}, {self.maximum!r})"


class ReadinessState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"  # it will never serve: ERROR/EXITED while booting, or gone


class Readiness(NamedTuple):
    """What the provider says about a worker that was booting: its state and, in words, why (or what it waits for)."""

    state: ReadinessState
    detail: str = ""

    @classmethod
    def ready(cls) -> Readiness:
        return cls(ReadinessState.READY)

    @classmethod
    def starting(cls, detail: str = "") -> Readiness:
        return cls(ReadinessState.STARTING, detail)

    @classmethod
    def failed(cls, detail: str) -> Readiness:
        return cls(ReadinessState.FAILED, detail)


class ManagedWorker(NamedTuple):
    """A worker the provider holds for some lease, as the reconciler sees it."""

    lease_id: str
    token: str
    created_at: datetime
    stopped_reason: str | None = None  # set when the worker no longer runs (exited, dead, stuck restarting)


class StoppedWorker(NamedTuple):
    """A managed worker that no longer runs, and why (recorded as its lease's failure reason)."""

    lease_id: str
    token: str
    reason: str


class ProviderCapacityError(Exception):
    """This provider cannot serve the request now; the policy falls over to the next one."""


class PriceAboveCeiling(ProviderCapacityError):
    """Every worker this provider could make costs more per hour than the request's `max_cost_per_hour`
    (nothing is left running); `cheapest` is the lowest price it saw (USD per hour), if any."""

    def __init__(self, message: str, cheapest: float | None = None) -> None:
        super().__init__(message)
        self.cheapest = cheapest


def above_ceiling(price: float | None, lease: Lease) -> bool:
    """True when a worker at `price` per hour may not serve `lease` (its request set a lower ceiling)."""
    return price is not None and lease.max_cost_per_hour is not None and price > lease.max_cost_per_hour


class ProviderUnreachable(ProviderCapacityError):
    """The provider's API cannot be reached at all (or not within the caller's deadline)."""


class WorkerOutcomeUnknown(ProviderUnreachable):
    """The call failed after the provider may have made the worker, and its removal could not be confirmed.

    The lease stays `pending`: the reconciler removes any worker carrying its lease id once the
    pending deadline passes, and ends the lease as `failed`.
    """


class ProviderRequestFailed(Exception):
    """The provider refused or failed the call; retrying on another provider won't help."""


class WorkerHostNotConfigured(ProviderRequestFailed):
    """The worker lives on a host this provider is no longer configured with (a Docker host removed from
    DOCKER_HOSTS): nothing can remove it, confirm it gone, or read it until the host is configured again or
    an operator retires it. Never "gone": its lease stays as it is (a release stays `releasing`, retried)."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(message)
        self.host = host


class ProviderNotConfigured(WorkerHostNotConfigured):
    """The worker runs on a provider PROVIDERS no longer names: no configured driver can remove it or confirm it
    gone, so its lease stays as it is (a release stays `releasing`, retried) until the provider is configured again."""


class WorkerGone(Exception):
    """The provider holds no worker for the lease (removed, or never made), so nothing of it can be read."""


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
    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> str | None:
        """Remove the lease's worker (by token; without one, every worker carrying the lease id) and return
        only once it is confirmed gone. Gone already, or never made, is fine.

        Returns None, or — when the worker was not seen removed but counts as gone on someone else's word
        (an operator retired its host) — why, which the lease records as it ends.

        ProviderRequestFailed (or ProviderUnreachable) when it cannot be removed or confirmed gone: the
        caller keeps its claim and retries later (WorkerHostNotConfigured: until its host is back).
        """

    @abstractmethod
    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every worker on this provider that carries our managed marker, running or stopped.

        ProviderRequestFailed (or ProviderUnreachable) if it cannot be listed: the reconciler skips this
        provider for this pass (it must not take an empty answer for "no workers").
        """

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        """The most a worker for `request` can cost per hour here (USD), within its `max_cost_per_hour`;
        the owner budgets reserve it before the worker exists.

        Default None: not known until the worker is made (the budgets then take the worker's own price
        when the lease is activated, and refuse it there if it does not fit). Never raises.
        """
        return None

    def regions(self) -> tuple[str, ...] | None:
        """The regions a request may name for this provider, which then places the worker there.

        Default None: this provider has no regions; it places anywhere and ignores a request's `region`.
        """
        return None

    def vouches_for(self, token: str | None) -> bool:
        """Whether the last `list_managed` covered where the worker `token` lives (its absence there is
        evidence). Default: True. A provider of several hosts lists what it can and says here which
        workers it could not see, so the reconciler judges no lease on a host it could not list (nor on a
        host it is not configured with; a host an operator retired is covered by the operator's word)."""
        return True

    def worker_key(self, token: str) -> str:
        """What a lease's recorded `token` and the token `list_managed` lists for the same worker have in
        common: the reconciler matches leases to the listing by it. Default: the token itself. A provider
        whose tokens changed form (local-docker: a bare container id on one host, `<host>/<id>` on a
        fleet) maps every form of one worker's token to one key, so no worker is taken for an orphan,
        nor its lease for a ghost, for the form its token was recorded in."""
        return token

    def placement_token(self, held: tuple[str, ...]) -> str | None:
        """For a lease that never recorded its worker's token (its acquire died, or could not tell whether
        a worker was made): the token `release` takes, from the counters the provider took for the lease
        itself (`ProvisionedWorker.held`, kept in its `held_counters`), so the release asks where the
        worker was being placed, and only that place may confirm it gone. Default None: `release(lease_id,
        None)` finds the worker by its lease id."""
        return None

    def place_counters(self) -> tuple[PlaceCounter, ...]:
        """The live-lease counters this provider keeps for places of its own (from its configuration: no call
        to the provider). The sweep reports each every minute (HostLeases), and the reconciler repairs them
        with the other counters when a place has a cap.

        Default: none (the provider's own cap, `<NAME>_MAX_LEASES`, is the service's counter, not the driver's).
        """
        return ()

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

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        """Whether the booting worker `token` is usable yet (`ready`), still booting, or never will be (`failed`).

        Default: ready (a provider that cannot tell hands out workers usable once provisioned).
        ProviderRequestFailed (or ProviderUnreachable) if it cannot be asked: the lease stays `starting`
        and the next read or sweep asks again.
        """
        return Readiness.ready()

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        """`readiness` of several booting workers (token → lease id), for the sweep; a token missing from the
        answer is left as it is. Default: one `readiness` call each; a provider with a listing overrides it."""
        return {token: self.readiness(lease_id, token, deadline) for token, lease_id in workers.items()}

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        """The worker's output (stdout and stderr, or the provider's log stream), oldest first: the last
        `query.tail` lines stamped at or after `query.since_ns`. Found by token, else by the lease id.

        WorkerGone: the provider holds no such worker (any more): the caller answers 410 for an ended
        lease. ProviderRequestFailed (or ProviderUnreachable): it could not be asked (502).
        Default: a provider that cannot serve logs refuses with ProviderRequestFailed.
        """
        raise ProviderRequestFailed(f"{self.name} does not serve worker logs")
