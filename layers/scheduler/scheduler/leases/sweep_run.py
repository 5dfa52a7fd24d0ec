"""One run of the scheduled sweep: its passes, in order, and whether the rest is handed on.

A scheduled run (hop 0) makes four passes:

1. readiness, FIRST and within its own slice of the run (READINESS_PASS_SECONDS): booting workers recorded
   ready, the leases of those that failed to boot ended (`readiness.check_starting_leases`), so that a
   backlog of due leases never starves the boot-failure checks;
2. due leases: every live lease past its expiry (or its stale release claim) released (`sweep.sweep`);
   what this run could not reach is handed on at once to another invocation (`Handoff`), hop + 1;
3. stopped workers: the leases of workers their provider reports stopped ended (`liveness`);
4. gauges: the live leases of each capped provider and of each place a provider keeps a counter for (a
   fleet's hosts), read from their counters (one BatchGetItem).

A handed-on run (hop > 0) only carries on with the due leases. The caller turns the result into metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from scheduler.leases.liveness import StoppedReport, fail_stopped_workers
from scheduler.leases.readiness import BootReport, ReadinessPolicy, check_starting_leases
from scheduler.leases.sweep import SweepReport, sweep
from scheduler.store.counters import Limit

if TYPE_CHECKING:
    from scheduler.leases.context import Context

# The readiness pass (one listing per provider) runs before the due leases, within this slice of the run.
READINESS_PASS_SECONDS = 15.0

HandOn = Callable[[int], bool]
"""Start another invocation as hop `hop` with what is left; False when it could not be started."""


class Gauges(NamedTuple):
    """Live leases as the counters hold them, read once per scheduled run."""

    by_provider: dict[str, int]  # each provider with a cap (`<NAME>_MAX_LEASES`): ActiveLeases
    by_place: dict[str, int]  # each place a provider keeps a counter for (a fleet's host): HostLeases


class SweepRun(NamedTuple):
    """What one run did, pass by pass (a pass it did not make: empty)."""

    hop: int
    booted: BootReport
    due: SweepReport
    handed_on: bool
    stopped: StoppedReport
    gauges: Gauges

    @property
    def scheduled(self) -> bool:
        """A run the schedule started (hop 0), not a hand-off."""
        return self.hop == 0


def run_sweep(ctx: Context, hop: int, readiness: ReadinessPolicy, hand_on: HandOn) -> SweepRun:
    """Run the sweep's passes as hop `hop` (0: the scheduled run, which makes all four; a hand-off makes the
    due-lease pass only), handing the rest on as hop + 1 when the due leases did not all fit."""
    scheduled = hop == 0
    booted = check_starting_leases(ctx.sooner(READINESS_PASS_SECONDS), readiness) if scheduled else BootReport()
    due = sweep(ctx)
    handed_on = due.more and hand_on(hop + 1)
    stopped = fail_stopped_workers(ctx) if scheduled else StoppedReport()
    gauges = read_gauges(ctx) if scheduled else Gauges({}, {})
    return SweepRun(hop, booted, due, handed_on, stopped, gauges)


def read_gauges(ctx: Context) -> Gauges:
    """The counted live leases of each capped provider and each place with a counter (one BatchGetItem)."""
    providers = {Limit.for_provider(name, cap).counter: name for name, cap in ctx.limits.provider_caps.items()}
    places = {counter.counter: counter.place for counter in ctx.providers.place_counters()}
    if not providers and not places:
        return Gauges({}, {})
    live = ctx.store.counters([*providers, *places])
    return Gauges(
        {name: live.get(counter, 0) for counter, name in providers.items()},
        {place: live.get(counter, 0) for counter, place in places.items()},
    )
