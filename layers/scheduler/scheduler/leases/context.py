"""What every use case works with, as one value: the lease store, the providers, the settings and the limits
they set, the clock, the invocation's deadline, and who it acts for.

A handler builds one per invocation from its runtime (`Runtime.context(deadline, caller)`); a test builds one on
whatever store and providers it arranged. The use cases name only what is here, so each of their rules
can be tested on any store that satisfies `LeaseStorePort`. Nothing is imported at run time but the tuple:
the use case modules import this module only for their annotations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from scheduler.callers.model import Caller
    from scheduler.clock import Clock
    from scheduler.config import Settings
    from scheduler.deadline import Deadline
    from scheduler.limits import LeaseLimits
    from scheduler.providers.configured import ConfiguredProviders
    from scheduler.store.port import LeaseStorePort


class Context(NamedTuple):
    """The store, providers, settings, limits, clock, deadline and caller of one invocation."""

    store: LeaseStorePort
    providers: ConfiguredProviders
    settings: Settings
    limits: LeaseLimits
    clock: Clock
    # Every provider call ends by then (`Deadline.never()` where no caller waits).
    deadline: Deadline
    # Whom the use case acts for: a request's caller (every access rule reads it, `scheduler.callers.access`), or
    # the service itself (`SWEEP`, `TTL_STREAM`, `RECONCILER`). Its name is what a lease records as created_by and
    # ended_by.
    caller: Caller

    def sooner(self, seconds: float) -> Context:
        """This context with its deadline `seconds` from now, if that comes first (a slice of the run)."""
        return self._replace(deadline=self.deadline.sooner(seconds))
