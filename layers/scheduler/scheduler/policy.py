"""Selection policy: the first provider in `PROVIDERS` order that can serve, falling over on capacity errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from aws_lambda_powertools import Logger

from scheduler.errors import NoCapacity
from scheduler.models import Lease, LeaseRequest
from scheduler.providers.base import Provider, ProviderCapacityError, ProvisionedWorker

logger = Logger(child=True)


def candidates_for(providers: Sequence[Provider], request: LeaseRequest) -> list[Provider]:
    """The providers that could serve `request`, in policy order."""
    return [provider for provider in providers if provider.available(request)]


def provision_first_available(
    candidates: Sequence[Provider],
    lease: Lease,
    env: Mapping[str, str],
    before_attempt: Callable[[Provider], None] | None = None,
    refusals: dict[str, str] | None = None,
) -> tuple[Provider, ProvisionedWorker]:
    """Provision on the first candidate that has capacity; NoCapacity when none has.

    `before_attempt` runs before each try (e.g. to take the provider's cap slot) and may itself
    refuse with ProviderCapacityError.
    """
    refusals = dict(refusals or {})
    for provider in candidates:
        try:
            if before_attempt is not None:
                before_attempt(provider)
            return provider, provider.provision(lease, env)
        except ProviderCapacityError as error:
            logger.warning(
                "provider has no capacity, trying the next", extra={"provider": provider.name, "reason": str(error)}
            )
            refusals[provider.name] = str(error)
    raise NoCapacity(
        f"no provider can serve kind={lease.kind} gpu={lease.gpu} now",
        details={"providers": refusals} if refusals else None,
    )
