"""Selection policy: the first provider in `PROVIDERS` order that can serve, falling over on capacity.

`attempt` is where the provider contract's errors on provision become decisions (see
`providers/base.py`): capacity (unreachable included) → skip to the next provider; a refusal → stop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from scheduler.deadline import Deadline
from scheduler.models import Lease
from scheduler.observability.log import Logger
from scheduler.providers.base import (
    PriceAboveCeiling,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProvisionedWorker,
    WorkerOutcomeUnknown,
)

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.request_models import LeaseRequest

logger = Logger(child=True)


class Provisioned(NamedTuple):
    """The provider made the worker."""

    provider: Provider
    worker: ProvisionedWorker


class Skipped(NamedTuple):
    """The provider cannot serve now: the next one is tried. `worker_may_exist`: it could not confirm
    that nothing was left behind, so the lease must stay `pending` for the reconciler."""

    reason: str
    worker_may_exist: bool = False
    cheapest: float | None = None  # the provider's price was above the request's ceiling: the lowest it saw


class Refused(NamedTuple):
    """The provider refused the request outright: no other provider is tried."""

    reason: str


Attempt = Provisioned | Skipped | Refused


def candidates_for(providers: Sequence[Provider], request: LeaseRequest) -> list[Provider]:
    """The providers that could serve `request`, in policy order."""
    return [provider for provider in providers if provider.available(request)]


def attempt(provider: Provider, lease: Lease, env: Mapping[str, str], deadline: Deadline) -> Attempt:
    """Ask one provider for the lease's worker; its error, if any, as the decision it stands for."""
    try:
        return Provisioned(provider, provider.provision(lease, env, deadline))
    except ProviderCapacityError as error:
        skipped(provider.name, str(error))
        cheapest = error.cheapest if isinstance(error, PriceAboveCeiling) else None
        return Skipped(str(error), worker_may_exist=isinstance(error, WorkerOutcomeUnknown), cheapest=cheapest)
    except ProviderRequestFailed as error:
        return Refused(str(error))


def skipped(provider: str, reason: str) -> None:
    """Log a provider passed over for capacity."""
    logger.warning("provider has no capacity, trying the next", extra={"provider": provider, "reason": reason})
