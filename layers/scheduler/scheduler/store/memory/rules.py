"""The state machine of `scheduler.lifecycle` applied to an item in memory: the sibling of `store/conditions.py`.

`conditions.py` renders a transition's source statuses, guards and writes into DynamoDB expressions;
here the same declarations are evaluated on the item itself, guard by guard and write by write, with the
same `Inputs`. The item keeps DynamoDB's layout (`store/items.py`), so what a read decodes is decoded by
the same `lease_from_item` on both stores. Numbers compare as DynamoDB compares them: by value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TypeVar

from scheduler.lifecycle import (
    LISTED_UNTIL_ENDED,
    LISTED_UNTIL_EXPIRY,
    Guard,
    LeaseStatus,
    Transition,
    WorkerState,
    Write,
)
from scheduler.store.conditions import INDEX_ATTRIBUTES, Inputs, reason_text
from scheduler.store.items import Item, number_attr, queue_attributes, string_attr
from scheduler.store.queue_records import QUEUE_ATTRIBUTES

_T = TypeVar("_T")


def number(item: Item, name: str) -> Decimal | None:
    """A number attribute's value (None when absent, or not a number)."""
    value = item.get(name, {}).get("N")
    return None if value is None else Decimal(value)


def text(item: Item, name: str) -> str | None:
    """A string attribute's value (None when absent, or not a string)."""
    value = item.get(name, {}).get("S")
    return value if isinstance(value, str) else None


def status_of(item: Item) -> LeaseStatus | None:
    """The lease's status (None: no such lease)."""
    found = text(item, "status")
    return LeaseStatus(found) if found else None


def holds(transition: Transition, inputs: Inputs, item: Item) -> bool:
    """The transition's condition on `item` ({} when absent): a source status and every guard."""
    if transition.source is None:
        return not item
    status = status_of(item)
    if status is None or status not in _sources(transition, inputs.expected):
        return False
    return all(_guard(guard, inputs, item) for guard in transition.guards)


def listed(item: Item, now: int) -> bool:
    """What a listing shows at `now` (`lifecycle.LISTED_UNTIL_EXPIRY`, `LISTED_UNTIL_ENDED`)."""
    status = status_of(item)
    expires = number(item, "expires_epoch")
    unexpired = status in LISTED_UNTIL_EXPIRY and expires is not None and expires > now
    return unexpired or status in LISTED_UNTIL_ENDED


def applied(transition: Transition, inputs: Inputs, item: Item) -> Item:
    """The item after the transition's writes (a new dict: `item` is left as it was).

    ENTER_INDEX, CREATED_BY, TAKE_COUNTERS and GIVE_BACK_COUNTERS are the store's, as in conditions.py: the index
    keys and created_by belong to new items, the counters to the same atomic step's other changes.
    """
    new = dict(item)
    target = transition.target or _required(inputs.outcome, "outcome")
    new["status"] = string_attr(target.value)
    for write in transition.writes:
        if write is Write.RECORD_WORKER:
            worker = _required(inputs.worker, "worker")
            new["provider"] = string_attr(worker.provider)
            new["provider_token"] = string_attr(worker.token)
            if worker.endpoint is not None:
                new["endpoint"] = string_attr(worker.endpoint)
            if worker.cost_per_hour is not None:
                new["cost_per_hour"] = number_attr(worker.cost_per_hour)
            if worker.ends_epoch is not None:
                new["worker_ends_epoch"] = number_attr(worker.ends_epoch)
            new.pop("queue_env", None)
        elif write is Write.WORKER_STATE:
            ready = inputs.worker is not None and inputs.worker.ready
            new["worker_state"] = string_attr((WorkerState.READY if ready else WorkerState.STARTING).value)
            if ready:
                new["ready_epoch"] = number_attr(inputs.now)
                new.pop("starting_shard", None)
        elif write is Write.CHECKED:
            new["ready_checked_epoch"] = number_attr(inputs.now)
        elif write is Write.WARN:
            new["warned_expiry"] = number_attr(_required(inputs.seen_expiry, "seen_expiry"))
        elif write is Write.READY:
            new["worker_state"] = string_attr(WorkerState.READY.value)
            new["ready_epoch"] = number_attr(inputs.now)
            new.pop("starting_shard", None)
        elif write is Write.EXTEND:
            _extend(new, inputs)
        elif write is Write.HOLD_COUNTERS:
            _set_held(new, inputs.held or ())
        elif write is Write.REWEIGH_COUNTERS:
            if inputs.reweighed is not None:
                new["held_counters"] = {"SS": sorted(set(inputs.reweighed))}
        elif write is Write.TAKE_CLAIM:
            outcome = string_attr(_required(transition.outcome, "outcome").value)
            kept = transition.keeps_outcome and "release_outcome" in item
            new["claim_id"] = string_attr(_required(inputs.claim_id, "claim_id"))
            new["release_outcome"] = item["release_outcome"] if kept else outcome
            new["due_at"] = number_attr(inputs.claim_due)
            new["ttl"] = number_attr(inputs.claim_ttl)
            if inputs.by is not None and not (transition.keeps_outcome and "claimed_by" in item):
                new["claimed_by"] = string_attr(inputs.by)
        elif write is Write.RECORD_REASON:
            if inputs.reason:
                new["failure_reason"] = string_attr(reason_text(inputs.reason))
        elif write is Write.END:
            new["released_epoch"] = number_attr(inputs.now)
            new["ttl"] = number_attr(inputs.retain_until)
        elif write is Write.ENDED_BY:
            if inputs.by is not None:
                new["ended_by"] = string_attr(inputs.by)
        elif write is Write.RENEWED_BY:
            if inputs.by is not None:
                new["renewed_by"] = string_attr(inputs.by)
            else:
                new.pop("renewed_by", None)
        elif write is Write.READY_BY:
            if inputs.by is not None:
                new["ready_by"] = string_attr(inputs.by)
        elif write is Write.LEAVE_INDEX:
            for name in INDEX_ATTRIBUTES:
                new.pop(name, None)
        else:
            _queue_write(write, inputs, item, new)
    return new


def _queue_write(write: Write, inputs: Inputs, item: Item, new: Item) -> None:
    """The writes of the queue and of preemption (ENTER_INDEX, CREATED_BY and the counters are the store's)."""
    if write is Write.ENTER_QUEUE:
        entry = _required(inputs.queue, "queue")
        new.pop("held_counters", None)
        new.update(
            {
                **queue_attributes(entry, inputs.now),
                **({"queued_epoch": item["queued_epoch"]} if "queued_epoch" in item else {}),
            }
        )
        new.pop("starting_shard", None)
    elif write is Write.LEAVE_QUEUE:
        for name in QUEUE_ATTRIBUTES:
            new.pop(name, None)
    elif write is Write.UNADMIT:
        new["created_epoch"] = number_attr(_required(inputs.queue, "queue").created)
        new.pop("admitted_epoch", None)
        new.pop("admission_id", None)
    elif write is Write.RETRY_LATER:
        entry = _required(inputs.queue, "queue")
        new["retry_epoch"] = number_attr(entry.retry_at)
        new["failed_admissions"] = number_attr(entry.failures)
    elif write is Write.ADMITTED:
        new["admitted_epoch"] = number_attr(inputs.now)
        new["created_epoch"] = number_attr(inputs.now)
        new["provider"] = string_attr(_required(inputs.provider, "provider"))
        new["starting_shard"] = string_attr(_required(inputs.shard, "shard"))
        new["admission_id"] = string_attr(_required(inputs.admission_id, "admission_id"))
    elif write is Write.NOTICE:
        notice = _required(inputs.notice, "notice")
        new["preempt_epoch"] = number_attr(notice.preempt_at)
        new["due_at"] = number_attr(notice.preempt_at)
        new["preempted_for"] = string_attr(notice.preemptor)
        new["preempt_priority"] = number_attr(notice.priority)


def _sources(transition: Transition, expected: LeaseStatus | None) -> frozenset[LeaseStatus]:
    source = _required(transition.source, "a source status")
    if expected is None:
        return source
    if expected not in source:
        raise ValueError(f"{transition.name} does not start from {expected}")
    return frozenset({expected})


def _guard(guard: Guard, inputs: Inputs, item: Item) -> bool:
    if guard is Guard.NOT_EXPIRED:
        return _compare(number(item, "expires_epoch"), inputs.now, above=True)
    if guard is Guard.DUE:
        return _compare(number(item, "due_at"), inputs.now, above=False)
    if guard is Guard.OWNER:
        owner = text(item, "owner_id")
        return "owner_id" not in item or (inputs.owner is not None and owner == inputs.owner)
    if guard is Guard.TOKEN:
        return inputs.token is None or text(item, "provider_token") == inputs.token
    if guard is Guard.SEEN_EXPIRY:
        return inputs.seen_expiry is None or number(item, "expires_epoch") == inputs.seen_expiry
    if guard is Guard.CLAIM:
        return text(item, "claim_id") == _required(inputs.claim_id, "claim_id")
    if guard is Guard.STARTING:
        return text(item, "worker_state") == WorkerState.STARTING.value
    if guard is Guard.WORKER_LIFE:
        # The new expiry against the worker's own end: DynamoDB's store reaches the same answer in two writes
        # when no ttl is given (it cannot add in a condition); here the lease's own ttl is at hand.
        ends, own = number(item, "worker_ends_epoch"), number(item, "ttl_seconds")
        ttl = inputs.ttl_seconds if inputs.ttl_seconds is not None else own
        return ends is None or ttl is None or inputs.start + int(ttl) <= ends
    if guard is Guard.NOT_WARNED:
        return number(item, "warned_expiry") != _required(inputs.seen_expiry, "seen_expiry")
    if guard is Guard.CHECK_DUE:
        checked = number(item, "ready_checked_epoch")
        return "ready_checked_epoch" not in item or (checked is not None and checked <= inputs.checked_before)
    return _queue_guard(guard, inputs, item)


def _queue_guard(guard: Guard, inputs: Inputs, item: Item) -> bool:
    """The guards of the queue and of preemption, as `conditions._queue_guard` renders them."""
    if guard is Guard.NOTICE_LIFE:
        notice, own = number(item, "preempt_epoch"), number(item, "ttl_seconds")
        ttl = inputs.ttl_seconds if inputs.ttl_seconds is not None else own
        return notice is None or (ttl is not None and inputs.start + int(ttl) <= notice)
    if guard is Guard.QUEUE_OPEN:
        return _compare(number(item, "queue_until"), inputs.now, above=True)
    if guard is Guard.PREEMPTIBLE:
        return item.get("preemptible", {}).get("BOOL") is True
    if guard is Guard.LOWER_PRIORITY:
        priority = number(item, "priority")
        return priority is not None and priority < inputs.priority
    if guard is Guard.RAN_MIN_RUNTIME:
        return _compare(number(item, "created_epoch"), inputs.ran_since, above=False)
    if guard is Guard.NO_NOTICE:
        return "preempt_epoch" not in item
    if guard is Guard.OUTLIVES_NOTICE:
        return _compare(number(item, "expires_epoch"), _required(inputs.notice, "notice").preempt_at, above=True)
    if guard is Guard.NOTICE_DUE:
        return _compare(number(item, "preempt_epoch"), inputs.now, above=False)
    raise ValueError(f"no evaluation for {guard}")


def _compare(value: Decimal | None, now: int, *, above: bool) -> bool:
    """`value > now` (above) or `value <= now`; false for an absent attribute, as in a DynamoDB condition."""
    if value is None:
        return False
    return value > now if above else value <= now


def _extend(item: Item, inputs: Inputs) -> None:
    if inputs.ttl_seconds is None:
        own = number(item, "ttl_seconds")
        if own is None:
            return  # no such lease: its condition refuses the write
        expires = inputs.start + int(own)
    else:
        expires = inputs.start + inputs.ttl_seconds
        item["ttl_seconds"] = number_attr(inputs.ttl_seconds)
    for name in ("expires_epoch", "due_at", "ttl"):
        item[name] = number_attr(expires)


def _set_held(item: Item, held: tuple[str, ...]) -> None:
    entries = sorted(set(held))
    if entries:
        item["held_counters"] = {"SS": entries}
    else:
        item.pop("held_counters", None)


def _required(value: _T | None, what: str) -> _T:
    if value is None:
        raise ValueError(f"the transition needs {what}")
    return value
