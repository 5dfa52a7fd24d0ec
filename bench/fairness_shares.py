"""What both parts of the fairness benchmark (bench/fairness.py) share: the owners, their weights and the cap, and
each owner's share of the lease-seconds against its weight's share."""

from __future__ import annotations

from typing import Any

WEIGHTS = {"anim": 2.0, "live": 1.0, "batch": 1.0}
OWNER_POLICIES = '{"anim": {"weight": 2}, "live": {"weight": 1}, "batch": {"weight": 1}}'
CAP = 8
WAITING_PER_OWNER = 4  # each owner keeps this many leases queued: the queue is never empty
WARMUP_OWNER = "warmup"  # holds the cap while the queue fills, so that the first admissions are the rule's too
MEMORY_TARGET_PERCENT = 5.0
STACK_TARGET_PERCENT = 10.0
RELEASE_TO_ADMISSION_SECONDS = 2.0  # issue 26: in make run, a queued lease is admitted within 2 s of a release


# --- shares ------------------------------------------------------------------------------------------------


def lease_seconds(spans: list[tuple[str, float, float]], start: float, end: float) -> dict[str, float]:
    """Each owner's lease-seconds within [start, end], from (owner, from, to) spans."""
    held = dict.fromkeys(WEIGHTS, 0.0)
    for owner, begins, ends in spans:
        held[owner] = held.get(owner, 0.0) + max(0.0, min(ends, end) - max(begins, start))
    return {owner: round(held[owner], 3) for owner in WEIGHTS}


def shares(seconds: dict[str, float]) -> dict[str, Any]:
    """Each owner's share of the lease-seconds against its weight's share: the deviation in points and relative."""
    total = sum(seconds.values()) or 1.0
    weight_total = sum(WEIGHTS.values())
    found = {}
    for owner, weight in WEIGHTS.items():
        share, fair = seconds[owner] / total, weight / weight_total
        found[owner] = {
            "lease_seconds": seconds[owner],
            "share_percent": round(100 * share, 2),
            "weight_share_percent": round(100 * fair, 2),
            "deviation_points": round(100 * (share - fair), 2),
            "deviation_relative_percent": round(100 * (share / fair - 1), 2),
        }
    return found


def worst(found: dict[str, Any]) -> float:
    return max(abs(owner["deviation_relative_percent"]) for owner in found.values())
