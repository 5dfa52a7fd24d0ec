"""Fairness: three owners with weights 2:1:1 (OWNER_POLICIES) keep the queue full against a cap of 8; each owner's
share of the lease-seconds is held to its weight's share (anim 50 %, live 25 %, batch 25 %).

1. In memory, with a simulated clock, through the real use cases (acquire with queue_seconds, release by the owner
   or expiry by the sweep, the admission pass the stream and the sweep run): 1,000 admissions, leases of seeded
   random length; each share within ±5 % of its weight's share. Every admission is also checked against the rule
   itself (among equal priorities, the owner with the fewest live leases on the capacity per unit of weight).
2. Through `make run` (the local stack on a TLS Docker host, `LOCAL_DOCKER_MAX_LEASES=8`): 100 admissions of short
   leases, each share within ±10 %; and the time from each release to the admission it let in, p50 and p99.

    .venv/bin/python bench/fairness.py [--admissions 1000 --stack-admissions 100 --seed 26]

"±5 %" is read as relative to the weight's share (25 % ± 1.25 points), the stricter of the two readings; the
absolute deviation in points is recorded too. Lease-seconds are counted within the window from the first admission
to the last one counted, so the leases still running at its end count as far as the window goes.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, write_result  # noqa: E402
from bench.fairness_shares import (  # noqa: E402
    CAP,
    MEMORY_TARGET_PERCENT,
    OWNER_POLICIES,
    RELEASE_TO_ADMISSION_SECONDS,
    STACK_TARGET_PERCENT,
    WAITING_PER_OWNER,
    WARMUP_OWNER,
    WEIGHTS,
    lease_seconds,
    shares,
    worst,
)

# --- (1) in memory, simulated clock ------------------------------------------------------------------------


class SimulatedClock:
    """Now, as the simulation moves it (whole seconds: the store keeps whole seconds)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> datetime:
        return self.now.replace(microsecond=0) + timedelta(seconds=seconds)


def memory_context(clock: SimulatedClock) -> Any:
    """The use cases' context: the in-memory store with its counters, the in-memory driver capped at CAP."""
    from scheduler.callers.model import SHARED_SECRET
    from scheduler.config import Settings
    from scheduler.deadline import Deadline
    from scheduler.leases.context import Context
    from scheduler.limits import LeaseLimits
    from scheduler.owner_policies import OwnerPolicies
    from scheduler.providers.configured import ConfiguredProviders
    from scheduler.providers.memory import MemoryProvider
    from scheduler.store.memory import MemoryLeaseStore

    store = MemoryLeaseStore(shards=1, retention_seconds=7 * 86400, release_claim_seconds=120, counters_table=True)
    provider = MemoryProvider("local-docker", clock=clock)
    settings = Settings(providers=("local-docker",), owner_policies=OwnerPolicies.parse(OWNER_POLICIES))
    providers = ConfiguredProviders(settings, factories={"local-docker": lambda _: provider})
    limits = LeaseLimits(provider_caps={"local-docker": CAP})
    return Context(store, providers, settings, limits, clock, Deadline.never(), SHARED_SECRET)


def memory_run(admissions: int, seed: int, lengths: tuple[int, int] = (60, 900)) -> dict[str, Any]:
    """`admissions` admissions: each admitted lease runs a seeded random length, then half are released by their
    owner and half expire (ended by the sweep); after each end the admission pass runs, as the stream runs it."""
    from scheduler.leases.acquire import acquire
    from scheduler.leases.admission import serve_queue
    from scheduler.leases.outcomes import Acquired, Queued
    from scheduler.leases.release import release
    from scheduler.leases.sweep import sweep
    from scheduler.models import WorkerKind
    from scheduler.request_models import LeaseRequest

    rng = random.Random(seed)
    clock = SimulatedClock()
    ctx = memory_context(clock)
    plans: dict[str, tuple[int, bool]] = {}  # lease id → (its length, released by its owner rather than expiring)
    ends: list[tuple[datetime, str]] = []  # (when it ends, lease id)
    spans: dict[str, tuple[str, float]] = {}  # live admitted lease → (owner, admitted at, in seconds)
    ended: list[tuple[str, float, float]] = []
    order: list[str] = []  # owners, in admission order
    violations: list[str] = []

    def seconds(moment: datetime) -> float:
        return (moment - datetime(2026, 12, 1, tzinfo=UTC)).total_seconds()

    def enqueue(owner: str) -> None:
        length, released = rng.randint(*lengths), rng.random() < 0.5
        ttl = length + 60 if released else length
        outcome = acquire(
            ctx, LeaseRequest(kind=WorkerKind.RENDERER, owner_id=owner, ttl_seconds=ttl, queue_seconds=86400)
        )
        if not isinstance(outcome, Queued):
            raise RuntimeError(f"the queue is never empty, so every acquire waits: {outcome}")
        plans[outcome.lease.lease_id] = (length, released)

    def admit_pass() -> None:
        waiting = [item.lease.owner_id or "-" for item in ctx.store.queued_leases()]
        live = Counter(lease.owner for lease in ctx.store.running_leases())
        for lease in serve_queue(ctx).admitted:
            owner = lease.owner_id or "-"
            best = min(live[candidate] / WEIGHTS[candidate] for candidate in set(waiting))
            if live[owner] / WEIGHTS[owner] > best:
                violations.append(f"{lease.lease_id} of {owner}: {dict(live)} at {clock.now.isoformat()}")
            live[owner] += 1
            waiting.remove(owner)
            order.append(owner)
            spans[lease.lease_id] = (owner, seconds(clock.now))
            length, _ = plans[lease.lease_id]
            heapq.heappush(ends, (clock.at(length), lease.lease_id))
            enqueue(owner)  # keeps its queue full

    warmups = []
    for _ in range(CAP):
        outcome = acquire(ctx, LeaseRequest(kind=WorkerKind.RENDERER, owner_id=WARMUP_OWNER, ttl_seconds=3600))
        assert isinstance(outcome, Acquired), outcome
        warmups.append(outcome.lease.lease_id)
    for owner in WEIGHTS:
        for _ in range(WAITING_PER_OWNER):
            enqueue(owner)
    clock.now += timedelta(seconds=1)
    start = seconds(clock.now)
    for lease_id in warmups:
        release(ctx, lease_id, WARMUP_OWNER)
    admit_pass()
    most = 0
    while len(order) < admissions:
        when, lease_id = heapq.heappop(ends)
        clock.now = when
        _, released = plans[lease_id]
        if released:
            release(ctx, lease_id, spans[lease_id][0])
        else:
            sweep(ctx)
        owner, began = spans.pop(lease_id)
        ended.append((owner, began, seconds(when)))
        admit_pass()
        most = max(most, sum(1 for _ in ctx.store.running_leases()))
    end = seconds(clock.now)
    spans_all = ended + [(owner, began, end) for owner, began in spans.values()]
    found = shares(lease_seconds(spans_all, start, end))
    return {
        "admissions": len(order),
        "admissions_by_owner": dict(Counter(order[:admissions])),
        "simulated_seconds": round(end - start),
        "shares": found,
        "worst_relative_deviation_percent": worst(found),
        "order_violations": len(violations),
        "order_violation_examples": violations[:5],
        "most_live_leases_after_a_pass": most,
        "ends": {"released_by_owner": sum(1 for _, r in plans.values() if r), "planned": len(plans)},
    }


# --- the run -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admissions", type=int, default=1000, help="in memory")
    parser.add_argument("--stack-admissions", type=int, default=100, help="through make run (0: skip it)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    parameters = {
        "weights": WEIGHTS,
        "owner_policies": OWNER_POLICIES,
        "cap": CAP,
        "waiting_per_owner": WAITING_PER_OWNER,
        "admissions_memory": args.admissions,
        "admissions_stack": args.stack_admissions,
        "seed": args.seed,
    }
    started = time.monotonic()
    memory = memory_run(args.admissions, args.seed)
    memory["wall_seconds"] = round(time.monotonic() - started, 1)
    found = [
        Target(
            "memory: worst share deviation, relative to the weight's share",
            memory["worst_relative_deviation_percent"],
            MEMORY_TARGET_PERCENT,
            "%",
            note=f"{memory['admissions']} admissions; order violations {memory['order_violations']}",
        )
    ]
    result: dict[str, Any] = {**envelope("fairness", parameters), "memory": memory}
    if args.stack_admissions:
        from bench.fairness_stack import stack_figures  # the Docker host's and the stack's modules, only here

        stack = stack_figures(args.stack_admissions, args.seed)
        result["stack"] = stack
        found += stack_targets(stack)
    result["targets"] = [target.as_dict() for target in found]
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('fairness', result, args.json)}")
    return 0


def stack_targets(stack: dict[str, Any]) -> list[Target]:
    if "skipped" in stack:
        return []
    latency = stack["release_to_admission_seconds"]
    return [
        Target(
            "make run: worst share deviation, relative to the weight's share",
            stack["worst_relative_deviation_percent"],
            STACK_TARGET_PERCENT,
            "%",
            note=f"{stack['admissions']} admissions",
        ),
        Target(
            "make run: release → next admission (seen out of the queue), p99",
            latency["p99"],
            RELEASE_TO_ADMISSION_SECONDS,
            "s",
            note=f"p50 {latency['p50']} s, max {latency['max']} s, {latency['count']} releases; to active: p50 "
            f"{stack['release_to_active_seconds']['p50']} s, p99 {stack['release_to_active_seconds']['p99']} s",
        ),
    ]


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: each owner's share against its weight's, and the release → admission time."""
    lines = ["## Fairness", ""]
    for name in ("memory", "stack"):
        part = result.get(name)
        if part is None:
            continue
        if "skipped" in part:
            lines.append(f"- make run: skipped ({part['skipped']})")
            continue
        owners = ", ".join(
            f"{owner} {figures['share_percent']} % (fair {figures['weight_share_percent']} %, "
            f"{figures['deviation_relative_percent']:+} % relative)"
            for owner, figures in part["shares"].items()
        )
        where = "in memory" if name == "memory" else "make run"
        lines.append(f"- {where}, {part['admissions']} admissions: {owners}")
        if name == "stack":
            latency, active = part["release_to_admission_seconds"], part["release_to_active_seconds"]
            lines.append(
                f"- make run, release → next admission (seen out of the queue): p50 {latency['p50']} s, p99 "
                f"{latency['p99']} s, max {latency['max']} s over {latency['count']} releases; release → that lease "
                f"active (its worker made): p50 {active['p50']} s, p99 {active['p99']} s; machine busy "
                f"{part.get('machine', {}).get('busy_share')}"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
