"""Selection policy: the first provider in `PROVIDERS` order that can serve, falling over on capacity errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from aws_lambda_powertools import Logger

from scheduler.deadline import Deadline, or_never
from scheduler.errors import NoCapacity
from scheduler.models import Lease, LeaseRequest
from scheduler.providers.base import (
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProvisionedWorker,
    WorkerOutcomeUnknown,
)

logger = Logger(child=True)


class NoCapacityWorkerUnsettled(NoCapacity):
    """No provider served, and one may have made a worker it could not confirm removed in time.

    The lease must stay `pending`: the reconciler removes whatever carries its lease id.
    """


class ProviderRefused(ProviderRequestFailed):
    """A provider refused the request outright; `refusals` names it (and any tried before) with the reason."""

    def __init__(self, message: str, refusals: dict[str, str]) -> None:
        super().__init__(message)
        self.refusals = refusals


def candidates_for(providers: Sequence[Provider], request: LeaseRequest) -> list[Provider]:
    """The providers that could serve `request`, in policy order."""
    return [provider for provider in providers if provider.available(request)]


def provision_first_available(
    candidates: Sequence[Provider],
    lease: Lease,
    env: Mapping[str, str],
    before_attempt: Callable[[Provider], None] | None = None,
    refusals: dict[str, str] | None = None,
    deadline: Deadline | None = None,
) -> tuple[Provider, ProvisionedWorker]:
    """Provision on the first candidate that has capacity; NoCapacity when none has.

    `before_attempt` runs before each try (e.g. to take the provider's cap slot) and may itself
    refuse with ProviderCapacityError. Every try runs under `deadline`; once it has passed, the
    providers not yet tried are reported as such instead.
    """
    deadline = or_never(deadline)
    refusals = dict(refusals or {})
    unsettled = False
    for provider in candidates:
        if deadline.expired:
            refusals[provider.name] = "not tried: the request's time budget ran out"
            continue
        try:
            if before_attempt is not None:
                before_attempt(provider)
            return provider, provider.provision(lease, env, deadline)
        except ProviderCapacityError as error:
            logger.warning(
                "provider has no capacity, trying the next", extra={"provider": provider.name, "reason": str(error)}
            )
            refusals[provider.name] = str(error)
            unsettled = unsettled or isinstance(error, WorkerOutcomeUnknown)
        except ProviderRequestFailed as error:
            raise ProviderRefused(str(error), {**refusals, provider.name: str(error)}) from error
    kind = NoCapacityWorkerUnsettled if unsettled else NoCapacity
    raise kind(
        f"no provider can serve kind={lease.kind} gpu={lease.gpu} now",
        details={"providers": refusals} if refusals else None,
    )
