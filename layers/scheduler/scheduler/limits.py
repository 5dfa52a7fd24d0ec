"""Which atomic limits an acquire takes: caps on live leases per provider (`<NAME>_MAX_LEASES`) and per
owner (`MAX_LEASES_PER_OWNER`), each a counter taken in the lease's own transaction (`store/counters.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from scheduler.budgets import OwnerBudgets, budget_owner
from scheduler.config import Settings
from scheduler.store.counters import Limit


class LeaseLimits(NamedTuple):
    """Which limits apply; unset means unlimited (and no counter is kept)."""

    provider_caps: Mapping[str, int] = MappingProxyType({})
    per_owner: int | None = None
    # Count every provider's live leases, capped or not. Off by default: it turns every acquire and
    # release into a transaction (2x the write units); the reconciler reports ActiveLeases from its
    # own listing instead, and the sweep adds the counted ones when caps are set.
    count_providers: bool = False
    # The owner budgets in USD (MAX_COST_PER_HOUR_PER_OWNER, MAX_SPEND_PER_OWNER_PER_DAY).
    budgets: OwnerBudgets = OwnerBudgets()

    @classmethod
    def from_settings(cls, settings: Settings) -> LeaseLimits:
        """The limits the environment sets."""
        return cls(
            provider_caps=dict(settings.provider_caps),
            per_owner=settings.max_leases_per_owner,
            budgets=OwnerBudgets.from_settings(settings),
        )

    @property
    def active(self) -> bool:
        """True when any cap or quota is set (and so counters are kept)."""
        return self.count_providers or bool(self.provider_caps) or self.per_owner is not None or self.budgets.active

    def for_provider(self, provider: str) -> Limit | None:
        """The cap on `provider`, if any."""
        cap = self.provider_caps.get(provider)
        if cap is None and not self.count_providers:
            return None
        return Limit.for_provider(provider, cap)

    def for_owner(self, owner_id: str | None) -> Limit | None:
        """The quota on `owner_id`; leases without an owner count against the shared owner `-`."""
        return None if self.per_owner is None else Limit.for_owner(budget_owner(owner_id), self.per_owner)
