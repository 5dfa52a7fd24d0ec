"""Condition and update expressions, rendered from the state machine in `scheduler.lifecycle`.

No status literal is written into an expression anywhere else: a transition's source statuses, its
guards and its writes become one `Rendered` (expressions with exactly the names and values they
use), which the store sends with its UpdateItem or transaction. What a caller is told when a condition
did not hold is `store/refusals.py`'s, for LeaseStore and the memory store alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from scheduler.lifecycle import (
    HOLDING,
    LISTED_UNTIL_ENDED,
    LISTED_UNTIL_EXPIRY,
    WARN_EXPIRY,
    Guard,
    LeaseStatus,
    Transition,
    WorkerState,
    Write,
)
from scheduler.store.items import number_attr, string_attr

if TYPE_CHECKING:
    from scheduler.store.queue_records import NoticeRecord, QueueEntry

MAX_FAILURE_REASON_CHARS = 1000
# What LEAVE_INDEX removes: the live index's keys and what only a live lease holds.
INDEX_ATTRIBUTES = (
    "live_shard",
    "due_at",
    "starting_shard",
    "claim_id",
    "release_outcome",
    "claimed_by",
    "held_counters",
    "queue_shard",
    "queue_order",
    "queue_wait",
    "queue_env",
)
_T = TypeVar("_T")


class WorkerRecord(NamedTuple):
    """What RECORD_WORKER writes: the provider that served and its worker."""

    provider: str
    token: str
    endpoint: str | None = None
    cost_per_hour: float | None = None
    ready: bool = False  # WORKER_STATE: the provider reports the worker usable at once
    ends_epoch: int | None = None  # when the provider itself ends the worker (None: it runs until released)


class Inputs(NamedTuple):
    """The values a transition's guards and writes are bound to (each used only where it applies)."""

    now: int = 0  # epoch seconds
    owner: str | None = None  # OWNER: the caller's X-Lease-Owner (None: it named none)
    token: str | None = None  # TOKEN: the worker the caller saw (None: no token check)
    claim_id: str | None = None  # CLAIM, TAKE_CLAIM
    expected: LeaseStatus | None = None  # narrows the transition's source statuses to this one
    worker: WorkerRecord | None = None  # RECORD_WORKER
    start: int = 0  # EXTEND: from when (epoch seconds, rounded up)
    ttl_seconds: int | None = None  # EXTEND: the new ttl (None: the lease's own)
    held: tuple[str, ...] | None = None  # HOLD_COUNTERS
    reason: str | None = None  # RECORD_REASON (None: nothing recorded)
    claim_due: int = 0  # TAKE_CLAIM: when a stale claim may be taken over
    claim_ttl: int = 0  # TAKE_CLAIM: TTL pushed out while the claim is held
    retain_until: int = 0  # END: the TTL of an ended lease
    outcome: LeaseStatus | None = None  # FINISH: the status the claim recorded
    checked_before: int = 0  # CHECK_DUE: a readiness check at or before this time is stale
    seen_expiry: int | None = None  # SEEN_EXPIRY: the expires_epoch the caller read (None: not checked)
    reweighed: tuple[str, ...] | None = None  # REWEIGH_COUNTERS: the held entries now (None: unchanged)
    by: str | None = None  # who acts: TAKE_CLAIM's claimed_by, ENDED_BY, RENEWED_BY, READY_BY (None: nothing recorded)
    queue: QueueEntry | None = None  # ENTER_QUEUE
    shard: str | None = None  # ADMITTED: the starting index's shard
    provider: str | None = None  # ADMITTED: the provider whose slot the lease holds
    admission_id: str | None = None  # ADMITTED: this admission's own id
    notice: NoticeRecord | None = None  # NOTICE, OUTLIVES_NOTICE
    priority: int = 0  # LOWER_PRIORITY: the preemptor's priority
    ran_since: int = 0  # RAN_MIN_RUNTIME: a lease made (or admitted) at or before this has run long enough


class Rendered(NamedTuple):
    """Expressions with their attribute names and values, ready for UpdateItem / a transaction item."""

    condition: str
    update: str
    names: dict[str, str]
    values: dict[str, Any]

    def request(self) -> dict[str, Any]:
        """The expression parameters of an UpdateItem (or a transaction's Update)."""
        request: dict[str, Any] = {"ConditionExpression": self.condition}
        if self.update:
            request["UpdateExpression"] = self.update
        if self.names:
            request["ExpressionAttributeNames"] = self.names
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        return request


def reason_text(reason: str) -> str:
    """A failure reason as stored: bounded, so a provider's long error text cannot bloat the item."""
    return reason if len(reason) <= MAX_FAILURE_REASON_CHARS else reason[: MAX_FAILURE_REASON_CHARS - 1] + "…"


class _Builder:
    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        self.names[f"#{attribute}"] = attribute
        return f"#{attribute}"

    def value(self, key: str, attribute_value: dict[str, Any]) -> str:
        self.values[f":{key}"] = attribute_value
        return f":{key}"

    def status(self, status: LeaseStatus) -> str:
        return self.value(f"status_{status.value}", string_attr(status.value))

    def status_in(self, statuses: Iterable[LeaseStatus]) -> str:
        chosen = sorted(statuses, key=list(LeaseStatus).index)
        if len(chosen) == 1:
            return f"{self.name('status')} = {self.status(chosen[0])}"
        return f"{self.name('status')} IN ({', '.join(self.status(s) for s in chosen)})"


def listed(now: int) -> Rendered:
    """The filter of what a listing shows (`lifecycle.LISTED_UNTIL_EXPIRY`, `LISTED_UNTIL_ENDED`) at `now`."""
    builder = _Builder()
    unexpired = f"expires_epoch > {builder.value('now', number_attr(now))}"
    text = f"(({builder.status_in(LISTED_UNTIL_EXPIRY)} AND {unexpired}) OR {builder.status_in(LISTED_UNTIL_ENDED)})"
    return Rendered(text, "", builder.names, builder.values)


def warnable(now: int) -> Rendered:
    """The filter of the leases the sweep may warn of their expiry at `now` (`lifecycle.WARN_EXPIRY`'s source
    statuses, not expired, and no warning written for the expiry they have now)."""
    builder = _Builder()
    statuses = builder.status_in(WARN_EXPIRY.source or ())
    unexpired = f"expires_epoch > {builder.value('now', number_attr(now))}"
    text = f"{statuses} AND {unexpired} AND (attribute_not_exists(warned_expiry) OR warned_expiry <> expires_epoch)"
    return Rendered(text, "", builder.names, builder.values)


def holding() -> Rendered:
    """The filter of the leases that hold capacity (`lifecycle.HOLDING`: every live one but a queued one)."""
    builder = _Builder()
    return Rendered(builder.status_in(HOLDING), "", builder.names, builder.values)


def condition(transition: Transition, inputs: Inputs) -> Rendered:
    """Only the condition: the lease is in a source status and passes every guard."""
    builder = _Builder()
    text = _condition(builder, transition, inputs)
    return Rendered(text, "", builder.names, builder.values)


def render(transition: Transition, inputs: Inputs) -> Rendered:
    """The condition and the update expression of `transition` on an existing lease."""
    builder = _Builder()
    text = _condition(builder, transition, inputs)
    sets, removes = _writes(builder, transition, inputs)
    update = " ".join(part for part in ("SET " + ", ".join(sets) if sets else "", _remove(removes)) if part)
    return Rendered(text, update, builder.names, builder.values)


def _condition(builder: _Builder, transition: Transition, inputs: Inputs) -> str:
    if transition.source is None:
        return "attribute_not_exists(lease_id)"
    statuses = _sources(transition, inputs.expected)
    status = builder.name("status")
    if len(statuses) == 1:
        parts = [f"{status} = {builder.status(statuses[0])}"]
    else:
        parts = [f"{status} IN ({', '.join(builder.status(s) for s in statuses)})"]
    for guard in transition.guards:
        part = _guard(builder, guard, inputs)
        if part:
            parts.append(part)
    return " AND ".join(parts)


def _sources(transition: Transition, expected: LeaseStatus | None) -> list[LeaseStatus]:
    assert transition.source is not None  # noqa: S101 - checked by the caller  # nosec B101
    if expected is None:
        return sorted(transition.source, key=list(LeaseStatus).index)
    if expected not in transition.source:
        raise ValueError(f"{transition.name} does not start from {expected}")
    return [expected]


def _guard(builder: _Builder, guard: Guard, inputs: Inputs) -> str:
    if guard is Guard.NOT_EXPIRED:
        return f"expires_epoch > {builder.value('now', number_attr(inputs.now))}"
    if guard is Guard.DUE:
        return f"due_at <= {builder.value('now', number_attr(inputs.now))}"
    if guard is Guard.OWNER:
        if inputs.owner is None:
            return "attribute_not_exists(owner_id)"
        return f"(attribute_not_exists(owner_id) OR owner_id = {builder.value('owner', string_attr(inputs.owner))})"
    if guard is Guard.TOKEN:
        if inputs.token is None:
            return ""
        return f"provider_token = {builder.value('token', string_attr(inputs.token))}"
    if guard is Guard.SEEN_EXPIRY:
        if inputs.seen_expiry is None:
            return ""
        return f"expires_epoch = {builder.value('seen_expiry', number_attr(inputs.seen_expiry))}"
    if guard is Guard.CLAIM:
        return f"claim_id = {builder.value('claim', string_attr(_required(inputs.claim_id, 'claim_id')))}"
    if guard is Guard.STARTING:
        return f"worker_state = {builder.value('starting', string_attr(WorkerState.STARTING.value))}"
    if guard is Guard.WORKER_LIFE:
        # DynamoDB compares, it does not add: without a ttl the new expiry (now + the lease's own ttl) is not a
        # value, so only a lease whose worker has no end of its own passes (`LeaseStore.renew` then asks again).
        unbounded = "attribute_not_exists(worker_ends_epoch)"
        if inputs.ttl_seconds is None:
            return unbounded
        expires = builder.value("expires", number_attr(inputs.start + inputs.ttl_seconds))
        return f"({unbounded} OR worker_ends_epoch >= {expires})"
    if guard is Guard.NOT_WARNED:
        warned = builder.value("seen_expiry", number_attr(_required(inputs.seen_expiry, "seen_expiry")))
        return f"(attribute_not_exists(warned_expiry) OR warned_expiry <> {warned})"
    if guard is Guard.CHECK_DUE:
        before = builder.value("checked_before", number_attr(inputs.checked_before))
        return f"(attribute_not_exists(ready_checked_epoch) OR ready_checked_epoch <= {before})"
    # The queue's guards render where they are used (renew's NOTICE_LIFE too): a read function never loads them.
    from scheduler.store.queue_conditions import queue_guard

    return queue_guard(builder, guard, inputs)


def _writes(builder: _Builder, transition: Transition, inputs: Inputs) -> tuple[list[str], list[str]]:
    status = builder.name("status")
    target = transition.target or _required(inputs.outcome, "outcome")
    sets = [f"{status} = {builder.value('target', string_attr(target.value))}"]
    removes: list[str] = []
    for write in transition.writes:
        if write is Write.RECORD_WORKER:
            worker = _required(inputs.worker, "worker")
            sets.append(f"provider = {builder.value('provider', string_attr(worker.provider))}")
            sets.append(f"provider_token = {builder.value('worker_token', string_attr(worker.token))}")
            if worker.endpoint is not None:
                sets.append(f"endpoint = {builder.value('endpoint', string_attr(worker.endpoint))}")
            if worker.cost_per_hour is not None:
                sets.append(f"cost_per_hour = {builder.value('cost', number_attr(worker.cost_per_hour))}")
            if worker.ends_epoch is not None:
                sets.append(f"worker_ends_epoch = {builder.value('worker_ends', number_attr(worker.ends_epoch))}")
            removes.append("queue_env")  # the worker has it now
        elif write is Write.WORKER_STATE:
            ready = inputs.worker is not None and inputs.worker.ready
            state = WorkerState.READY if ready else WorkerState.STARTING
            sets.append(f"worker_state = {builder.value('worker_state', string_attr(state.value))}")
            if ready:
                sets.append(f"ready_epoch = {builder.value('now', number_attr(inputs.now))}")
                removes.append("starting_shard")
        elif write is Write.CHECKED:
            sets.append(f"ready_checked_epoch = {builder.value('now', number_attr(inputs.now))}")
        elif write is Write.WARN:
            warned = builder.value("seen_expiry", number_attr(_required(inputs.seen_expiry, "seen_expiry")))
            sets.append(f"warned_expiry = {warned}")
        elif write is Write.READY:
            sets.append(f"worker_state = {builder.value('ready', string_attr(WorkerState.READY.value))}")
            sets.append(f"ready_epoch = {builder.value('now', number_attr(inputs.now))}")
            removes.append("starting_shard")
        elif write is Write.EXTEND:
            sets += _extend(builder, inputs)
        elif write is Write.HOLD_COUNTERS:
            held = sorted(set(inputs.held or ()))
            if held:
                sets.append(f"held_counters = {builder.value('held', {'SS': held})}")
            else:
                removes.append("held_counters")
        elif write is Write.REWEIGH_COUNTERS:
            if inputs.reweighed is not None:
                sets.append(f"held_counters = {builder.value('reweighed', {'SS': sorted(set(inputs.reweighed))})}")
        elif write is Write.TAKE_CLAIM:
            outcome = builder.value("outcome", string_attr(_required(transition.outcome, "outcome").value))
            kept = f"if_not_exists(release_outcome, {outcome})" if transition.keeps_outcome else outcome
            ttl = builder.name("ttl")
            sets.append(f"claim_id = {builder.value('claim', string_attr(_required(inputs.claim_id, 'claim_id')))}")
            sets.append(f"release_outcome = {kept}")
            sets.append(f"due_at = {builder.value('claim_due', number_attr(inputs.claim_due))}")
            sets.append(f"{ttl} = {builder.value('claim_ttl', number_attr(inputs.claim_ttl))}")
            if inputs.by is not None:
                by = builder.value("by", string_attr(inputs.by))
                sets.append(f"claimed_by = {f'if_not_exists(claimed_by, {by})' if transition.keeps_outcome else by}")
        elif write is Write.RECORD_REASON:
            if inputs.reason:
                sets.append(f"failure_reason = {builder.value('reason', string_attr(reason_text(inputs.reason)))}")
        elif write is Write.END:
            sets.append(f"released_epoch = {builder.value('now', number_attr(inputs.now))}")
            sets.append(f"{builder.name('ttl')} = {builder.value('retain', number_attr(inputs.retain_until))}")
        elif write is Write.ENDED_BY:
            if inputs.by is not None:
                sets.append(f"ended_by = {builder.value('by', string_attr(inputs.by))}")
        elif write is Write.RENEWED_BY:
            if inputs.by is not None:
                sets.append(f"renewed_by = {builder.value('by', string_attr(inputs.by))}")
            else:
                removes.append("renewed_by")  # an earlier renewal's caller must not be taken for this one's
        elif write is Write.READY_BY:
            if inputs.by is not None:
                sets.append(f"ready_by = {builder.value('by', string_attr(inputs.by))}")
        elif write is Write.LEAVE_INDEX:
            removes += list(INDEX_ATTRIBUTES)
        elif write in _QUEUE_WRITES:
            from scheduler.store.queue_conditions import queue_write

            queue_write(builder, write, inputs, sets, removes)
        # ENTER_INDEX, CREATED_BY, TAKE_COUNTERS and GIVE_BACK_COUNTERS are written by the store: the index keys
        # and created_by belong to new items, the counters to other items of the same transaction.
    return sets, removes


_QUEUE_WRITES = frozenset(
    {Write.ENTER_QUEUE, Write.LEAVE_QUEUE, Write.ADMITTED, Write.NOTICE, Write.UNADMIT, Write.RETRY_LATER}
)


def _extend(builder: _Builder, inputs: Inputs) -> list[str]:
    ttl = builder.name("ttl")
    if inputs.ttl_seconds is None:
        expires = f"{builder.value('start', number_attr(inputs.start))} + ttl_seconds"
        return [f"expires_epoch = {expires}", f"due_at = {expires}", f"{ttl} = {expires}"]
    expires = builder.value("expires", number_attr(inputs.start + inputs.ttl_seconds))
    return [
        f"expires_epoch = {expires}",
        f"due_at = {expires}",
        f"{ttl} = {expires}",
        f"ttl_seconds = {builder.value('ttl_seconds', number_attr(inputs.ttl_seconds))}",
    ]


def _remove(attributes: Iterable[str]) -> str:
    unique = list(dict.fromkeys(attributes))
    return "REMOVE " + ", ".join(unique) if unique else ""


def _required(value: _T | None, what: str) -> _T:
    if value is None:
        raise ValueError(f"the transition needs {what}")
    return value
