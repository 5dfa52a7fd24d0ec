"""DynamoDB item encoding of leases: the wire fields, with times as epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from scheduler.costs import accrued_usd
from scheduler.lifecycle import LeaseStatus, Seen, WorkerState
from scheduler.models import GpuClass, Lease, WorkerKind

if TYPE_CHECKING:  # a function that only reads leases never builds these classes
    from scheduler.store.queue_records import QueueEntry

Item = dict[str, dict[str, Any]]
DEFAULT_PRIORITY = 50


def epoch(value: datetime) -> int:
    return int(value.timestamp())


def from_epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(float(value)), UTC)


def string_attr(value: str | None) -> dict[str, Any]:
    return {"NULL": True} if value is None else {"S": value}


# DynamoDB's number type: up to 38 significant digits, magnitude 1E-130 to 9.9999999999999999999999999999999999999E+125.
MAX_SIGNIFICANT_DIGITS = 38
MIN_EXPONENT = -130
MAX_EXPONENT = 125


class InvalidNumber(ValueError):
    """A value DynamoDB cannot store as a number (NaN, infinite, too many digits, out of range)."""


def number_attr(value: float | int | Decimal) -> dict[str, str]:
    """A DynamoDB number; InvalidNumber for a value DynamoDB would refuse, before anything is sent."""
    return {"N": dynamodb_number(value)}


def dynamodb_number(value: float | int | Decimal) -> str:
    """`value` as DynamoDB's number text, checked against DynamoDB's documented limits."""
    if isinstance(value, bool) or not isinstance(value, float | int | Decimal):
        raise InvalidNumber(f"not a number: {value!r}")
    try:
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, ValueError) as error:
        raise InvalidNumber(f"not a number: {value!r}") from error
    if not exact.is_finite():
        raise InvalidNumber(f"DynamoDB stores no NaN or infinity: {value!r}")
    if exact.is_zero():
        return "0"
    digits = "".join(map(str, exact.as_tuple().digits)).strip("0")  # not normalize(): it rounds to 28 digits
    if len(digits) > MAX_SIGNIFICANT_DIGITS:
        raise InvalidNumber(f"more than {MAX_SIGNIFICANT_DIGITS} significant digits: {value!r}")
    if not MIN_EXPONENT <= exact.adjusted() <= MAX_EXPONENT:
        raise InvalidNumber(f"outside DynamoDB's number range (1E{MIN_EXPONENT} to 1E{MAX_EXPONENT + 1}): {value!r}")
    return str(value) if isinstance(value, int) else str(exact)


def lease_from_item(item: Item, now_epoch: int | None = None) -> Lease:
    """Build the wire model from a DynamoDB item (table, index or stream image).

    `cost_usd` is final once the lease has ended (its rate from creation to the confirmed release); while
    it is live it is accrued to `now_epoch` when given, else left for `Lease.wire()` to accrue when shown
    (so that the same item always reads as the same Lease).
    """

    def text(name: str) -> str | None:
        return item.get(name, {}).get("S")

    def number(name: str) -> str | None:
        return item.get(name, {}).get("N")

    def moment(name: str) -> datetime | None:
        found = number(name)
        return None if found is None else from_epoch(found)

    released = number("released_epoch")
    cost = number("cost_per_hour")
    ready = number("ready_epoch")
    status = LeaseStatus(item["status"]["S"])
    state = text("worker_state")
    # An active lease written before readiness existed had its worker from activation on.
    worker_state = (
        WorkerState(state) if state else (WorkerState.READY if status != LeaseStatus.PENDING else WorkerState.STARTING)
    )
    ceiling = number("max_cost_per_hour")
    preemptor = number("preempt_priority")
    rate = float(cost) if cost else None
    created = int(float(item["created_epoch"]["N"]))
    end = int(float(released)) if released else now_epoch
    return Lease(
        lease_id=item["lease_id"]["S"],
        provider=item["provider"]["S"],
        kind=WorkerKind(item["kind"]["S"]),
        gpu=GpuClass(item["gpu"]["S"]),
        status=status,
        endpoint=text("endpoint"),
        created_at=from_epoch(item["created_epoch"]["N"]),
        expires_at=from_epoch(item["expires_epoch"]["N"]),
        released_at=from_epoch(released) if released else None,
        provider_token=text("provider_token"),
        owner_id=text("owner_id"),
        correlation_id=text("correlation_id"),
        region=text("region"),
        ttl_seconds=int(item["ttl_seconds"]["N"]),
        cost_per_hour=rate,
        failure_reason=text("failure_reason"),
        worker_state=worker_state,
        ready_at=from_epoch(ready) if ready else None,
        max_cost_per_hour=float(ceiling) if ceiling else None,
        cost_usd=None if end is None else accrued_usd(rate, created, end),
        created_by=text("created_by"),
        ended_by=text("ended_by"),
        # A lease recorded before priorities existed was acquired at the default one, and is not preemptible.
        priority=int(number("priority") or DEFAULT_PRIORITY),
        preemptible=item.get("preemptible", {}).get("BOOL") is True,
        queued_at=moment("queued_epoch"),
        queued_until=moment("queue_until"),
        queue_reason=text("queue_reason"),
        admitted_at=moment("admitted_epoch"),
        preempt_at=moment("preempt_epoch"),
        preempt_priority=None if preemptor is None else int(preemptor),
    )


def new_item(lease: Lease, shard: str) -> Item:
    """The item of a lease as `record` writes it: live, so it carries the sweep index keys (due at expiry),
    and its worker starting, so it carries the starting index key until the worker is ready."""
    item: Item = {
        "lease_id": string_attr(lease.lease_id),
        "provider": string_attr(lease.provider),
        "kind": string_attr(lease.kind.value),
        "gpu": string_attr(lease.gpu.value),
        "status": string_attr(lease.status.value),
        "created_epoch": number_attr(epoch(lease.created_at)),
        "expires_epoch": number_attr(epoch(lease.expires_at)),
        "ttl_seconds": number_attr(lease.ttl_seconds),
        "ttl": number_attr(epoch(lease.expires_at)),
        "live_shard": string_attr(shard),
        "due_at": number_attr(epoch(lease.expires_at)),
        "worker_state": string_attr(WorkerState.STARTING.value),
        "starting_shard": string_attr(shard),
    }
    for name in ("owner_id", "correlation_id", "region", "created_by"):
        value = getattr(lease, name)
        if value is not None:
            item[name] = string_attr(value)
    if lease.max_cost_per_hour is not None:
        item["max_cost_per_hour"] = number_attr(lease.max_cost_per_hour)
    item["priority"] = number_attr(lease.priority)
    item["preemptible"] = {"BOOL": lease.preemptible}
    if lease.queued_until is not None:  # how long it may wait in the queue (`requeue` holds it to that)
        item["queue_until"] = number_attr(epoch(lease.queued_until))
    return item


def queued_item(lease: Lease, shard: str, entry: QueueEntry) -> Item:
    """The item of a lease as `enqueue` writes it: live (in the sweep index, due at queued_until) and in the
    queue index, holding no counter, its worker not started."""
    item = new_item(lease, shard)
    del item["starting_shard"]
    item.update(queue_attributes(entry, epoch(lease.created_at)))
    return item


def queue_attributes(entry: QueueEntry, now: int) -> Item:
    """What ENTER_QUEUE writes (`queued_epoch`: `now` unless the item keeps an earlier one)."""
    attributes: Item = {
        "queue_shard": string_attr(entry.shard),
        "queue_order": number_attr(entry.order),
        "queue_reason": string_attr(entry.reason),
        "queued_epoch": number_attr(now),
        "queue_until": number_attr(entry.until),
        "expires_epoch": number_attr(entry.until),
        "due_at": number_attr(entry.until),
        "ttl": number_attr(entry.retain_until),
    }
    attributes["queue_providers"] = string_attr(",".join(entry.providers))
    from scheduler.store.queue_records import QUEUE_WAITS

    attributes["queue_wait"] = string_attr(QUEUE_WAITS[entry.capacity])
    if entry.env is not None:
        attributes["queue_env"] = string_attr(entry.env)
    return attributes


def claimed_by(item: Item) -> str | None:
    """Who holds (or first took) the lease's release claim, as the claim recorded it."""
    return item.get("claimed_by", {}).get("S")


def seen(item: Item) -> Seen | None:
    """What the state machine looks at in a lease item (None for an absent one)."""
    if not item:
        return None
    return Seen(
        status=LeaseStatus(item["status"]["S"]),
        expires_epoch=int(item["expires_epoch"]["N"]),
        owner_id=item.get("owner_id", {}).get("S"),
        worker_ends_epoch=int(item["worker_ends_epoch"]["N"]) if "worker_ends_epoch" in item else None,
        preempt_epoch=int(item["preempt_epoch"]["N"]) if "preempt_epoch" in item else None,
    )
