"""Who is admitted next, and whom a waiting lease preempts: the queue's rules as pure functions of what is waiting,
what runs and what is free (no store, no clock, no provider), so that each rule is tested alone and the fairness
benchmark drives them with a simulated clock.

The order (`plan().order`): priority, highest first; among equal priorities, the owner whose live leases on the
capacity the lease waits for, divided by the owner's weight (`OWNER_POLICIES`), are fewest; then the oldest. Each
lease placed counts as its owner's from then on, so the order is the one in which the leases would be admitted
as capacity frees a slot at a time. What fits now (`plan().admit`) is taken in that order, a lease that cannot
fit not blocking those behind it that can (BestEffortFIFO).

Preemption (`plan().notices`): a waiting lease that cannot fit for want of a capped provider's slot, whose owner's
quota has room, gets one victim: a running, preemptible lease of strictly lower priority on one of those
providers that has run at least MIN_RUNTIME_SECONDS, has no notice yet and would outlive the notice — the lowest
priority first, then the owner furthest over its weighted share of that capacity, then the newest. No loops: a
lease with a notice is never chosen again, a preempted lease is not requeued, a waiting lease has at most one
victim noticed for it (a slot is all it needs), and a slot already coming free (a notice whose preemptor no
longer waits) is taken before anyone else is noticed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from scheduler.owner_policies import OwnerPolicies


class Waiting(NamedTuple):
    """A queued lease, as the rules see it."""

    lease_id: str
    owner: str  # whom its quota and share count against (`-` for a lease without an owner)
    priority: int
    queued_epoch: int  # when it joined the queue: the age that breaks ties
    providers: tuple[str, ...]  # the providers that could serve it, in policy order (the capacity it waits for)


class Running(NamedTuple):
    """A lease that holds capacity (pending, active or releasing), as the rules see it."""

    lease_id: str
    owner: str
    provider: str
    priority: int = 50
    preemptible: bool = False
    started_epoch: int = 0  # when it was made, or admitted: its runtime counts from then
    expires_epoch: int = 0
    preempt_epoch: int | None = None  # its preemption notice's end, if it has one
    preempted_for: str | None = None  # the waiting lease the notice is for


class Capacity(NamedTuple):
    """What is free now: each capped provider's free slots (a provider not named, or None: no cap), and the
    per-owner quota (MAX_LEASES_PER_OWNER; None: none)."""

    free: Mapping[str, int | None]
    owner_limit: int | None = None


class Rules(NamedTuple):
    policies: OwnerPolicies = OwnerPolicies()
    min_runtime_seconds: int = 300
    notice_seconds: int = 120


class Notice(NamedTuple):
    """Preempt `victim` at `preempt_at` for `preemptor` (of `priority`)."""

    victim: str
    preemptor: str
    preempt_at: int
    priority: int


class Plan(NamedTuple):
    order: tuple[str, ...]  # every waiting lease, in admission order (its position: index + 1)
    admit: tuple[str, ...]  # those that fit now, in that order
    notices: tuple[Notice, ...]


class _Shares:
    """Each owner's live leases per provider, and its weighted share of a set of providers."""

    def __init__(self, running: Iterable[Running], policies: OwnerPolicies) -> None:
        self.counts: Counter[tuple[str, str]] = Counter((lease.owner, lease.provider) for lease in running)
        self._policies = policies

    def share(self, owner: str, providers: Iterable[str]) -> float:
        return sum(self.counts[(owner, provider)] for provider in set(providers)) / self._policies.weight(owner)

    def add(self, owner: str, provider: str) -> None:
        self.counts[(owner, provider)] += 1


def rank(lease: Waiting, shares: _Shares) -> tuple[float, float, int, str]:
    """The sort key of the admission order (smallest first): priority, weighted share, age, id."""
    return (-lease.priority, shares.share(lease.owner, lease.providers), lease.queued_epoch, lease.lease_id)


def admission_order(waiting: Iterable[Waiting], running: Iterable[Running], policies: OwnerPolicies) -> list[str]:
    """Every waiting lease in admission order (position = index + 1), capacity aside."""
    return list(plan(waiting, running, Capacity({}), Rules(policies), now=0).order)


def plan(waiting: Iterable[Waiting], running: Iterable[Running], capacity: Capacity, rules: Rules, now: int) -> Plan:
    """The admission order, what fits now, and the preemption notices to give."""
    running = list(running)
    shares = _Shares(running, rules.policies)
    held = Counter(lease.owner for lease in running)  # each owner's live leases, for its quota
    free = dict(capacity.free)
    remaining = {lease.lease_id: lease for lease in waiting}
    waiting_ids = set(remaining)
    order: list[Waiting] = []
    admit: list[str] = []
    blocked: list[Waiting] = []
    while remaining:
        best = min(remaining.values(), key=lambda lease: rank(lease, shares))
        del remaining[best.lease_id]
        order.append(best)
        room = _room(best, free, held, capacity.owner_limit)
        # Placed in the order, it counts as its owner's for the leases after it (as if admitted in turn).
        shares.add(best.owner, room if isinstance(room, str) and room != _NO_ROOM else _first(best))
        if room == _NO_ROOM:
            blocked.append(best)
            continue
        admit.append(best.lease_id)
        held[best.owner] += 1
        if room is not None:
            free[room] = (free[room] or 0) - 1
    notices = _notices(blocked, running, free, shares, held, capacity.owner_limit, rules, now, waiting_ids)
    return Plan(tuple(lease.lease_id for lease in order), tuple(admit), tuple(notices))


def _first(lease: Waiting) -> str:
    return lease.providers[0] if lease.providers else ""


_NO_ROOM = "-"  # no provider of the lease has a slot, or its owner's quota is full


def _room(lease: Waiting, free: Mapping[str, int | None], held: Counter[str], owner_limit: int | None) -> str | None:
    """The capped provider whose slot the lease takes (None: an uncapped one), or _NO_ROOM."""
    if owner_limit is not None and held[lease.owner] >= owner_limit:
        return _NO_ROOM
    for provider in lease.providers:
        slots = free.get(provider)
        if slots is None:
            return None
        if slots > 0:
            return provider
    return _NO_ROOM


def _notices(
    blocked: list[Waiting],
    running: list[Running],
    free: Mapping[str, int | None],
    shares: _Shares,
    held: Counter[str],
    owner_limit: int | None,
    rules: Rules,
    now: int,
    waiting_ids: set[str],
) -> list[Notice]:
    noticed_for = {lease.preempted_for for lease in running if lease.preempt_epoch is not None}
    # Slots already coming free: notices whose preemptor no longer waits (admitted meanwhile, cancelled, expired).
    coming = [lease for lease in running if lease.preempt_epoch is not None and lease.preempted_for not in waiting_ids]
    chosen: set[str] = set()
    notices: list[Notice] = []
    for lease in blocked:
        if lease.lease_id in noticed_for:
            continue  # it has its victim already
        if owner_limit is not None and held[lease.owner] >= owner_limit:
            continue  # its own quota keeps it waiting: no other owner's lease would help
        capped = {provider for provider in lease.providers if free.get(provider) is not None}
        if not capped:
            continue  # it waits for a provider's own capacity, which preempting does not free
        spare = next((victim for victim in coming if victim.provider in capped), None)
        if spare is not None:
            coming.remove(spare)
            held[lease.owner] += 1
            continue
        victim = _victim(lease, capped, running, chosen, shares, rules, now)
        if victim is not None:
            chosen.add(victim.lease_id)
            held[lease.owner] += 1  # the slot it will be handed counts against its owner's quota
            notices.append(Notice(victim.lease_id, lease.lease_id, now + rules.notice_seconds, lease.priority))
    return notices


def _victim(
    lease: Waiting,
    capped: set[str],
    running: list[Running],
    chosen: set[str],
    shares: _Shares,
    rules: Rules,
    now: int,
) -> Running | None:
    """The one lease to preempt for `lease` (None: none may be)."""
    candidates = [
        victim
        for victim in running
        if victim.provider in capped
        and victim.preemptible
        and victim.priority < lease.priority
        and victim.preempt_epoch is None
        and victim.lease_id not in chosen
        and now - victim.started_epoch >= rules.min_runtime_seconds
        and victim.expires_epoch > now + rules.notice_seconds
    ]
    if not candidates:
        return None
    return min(
        candidates,
        key=lambda victim: (
            victim.priority,
            -shares.share(victim.owner, capped),
            -victim.started_epoch,
            victim.lease_id,
        ),
    )
