"""The queue's guards and writes rendered as DynamoDB expressions: `store/conditions.py`'s, kept apart so that a
function that never renders a queue transition (a read) never loads them. `conditions` hands each one its
expression builder (`Builder`: the attribute names and values an expression uses) and the transition's inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from scheduler.lifecycle import Guard, Write
from scheduler.store.items import number_attr, string_attr
from scheduler.store.queue_records import QUEUE_ATTRIBUTES, QUEUE_WAITS

if TYPE_CHECKING:
    from scheduler.store.queue_records import NoticeRecord, QueueEntry

_T = TypeVar("_T")


class Builder(Protocol):
    """`conditions._Builder`: names an attribute, binds a value, each once per expression."""

    def name(self, attribute: str) -> str: ...

    def value(self, key: str, attribute_value: dict[str, Any]) -> str: ...


class Inputs(Protocol):
    """What of `conditions.Inputs` the queue's guards and writes read."""

    @property
    def now(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def ttl_seconds(self) -> int | None: ...
    @property
    def queue(self) -> QueueEntry | None: ...
    @property
    def shard(self) -> str | None: ...
    @property
    def provider(self) -> str | None: ...
    @property
    def admission_id(self) -> str | None: ...
    @property
    def notice(self) -> NoticeRecord | None: ...
    @property
    def priority(self) -> int: ...
    @property
    def ran_since(self) -> int: ...


def queue_guard(builder: Builder, guard: Guard, inputs: Inputs) -> str:
    """The guards of the queue and of preemption."""
    if guard is Guard.NOTICE_LIFE:
        # As WORKER_LIFE: without a ttl only a lease without a notice passes (`LeaseStore.renew` then asks again).
        unnoticed = "attribute_not_exists(preempt_epoch)"
        if inputs.ttl_seconds is None:
            return unnoticed
        expires = builder.value("expires", number_attr(inputs.start + inputs.ttl_seconds))
        return f"({unnoticed} OR preempt_epoch >= {expires})"
    if guard is Guard.QUEUE_OPEN:
        return f"queue_until > {builder.value('now', number_attr(inputs.now))}"
    if guard is Guard.PREEMPTIBLE:
        return f"preemptible = {builder.value('true', {'BOOL': True})}"
    if guard is Guard.LOWER_PRIORITY:
        return f"priority < {builder.value('priority', number_attr(inputs.priority))}"
    if guard is Guard.RAN_MIN_RUNTIME:
        return f"created_epoch <= {builder.value('ran_since', number_attr(inputs.ran_since))}"
    if guard is Guard.NO_NOTICE:
        return "attribute_not_exists(preempt_epoch)"
    if guard is Guard.OUTLIVES_NOTICE:
        notice = _required(inputs.notice, "notice")
        return f"expires_epoch > {builder.value('preempt_at', number_attr(notice.preempt_at))}"
    if guard is Guard.NOTICE_DUE:
        return f"preempt_epoch <= {builder.value('now', number_attr(inputs.now))}"
    raise ValueError(f"no rendering for {guard}")


def queue_write(builder: Builder, write: Write, inputs: Inputs, sets: list[str], removes: list[str]) -> None:
    """The writes of the queue and of preemption."""
    if write is Write.ENTER_QUEUE:
        entry = _required(inputs.queue, "queue")
        until = builder.value("queued_until", number_attr(entry.until))
        sets.append(f"queue_shard = {builder.value('queue_shard', string_attr(entry.shard))}")
        sets.append(f"queue_order = {builder.value('queue_order', number_attr(entry.order))}")
        sets.append(f"queue_reason = {builder.value('queue_reason', string_attr(entry.reason))}")
        now = builder.value("now", number_attr(inputs.now))
        sets.append(f"queued_epoch = if_not_exists(queued_epoch, {now})")
        sets.append(f"queue_until = {until}")
        sets.append(f"expires_epoch = {until}")
        sets.append(f"due_at = {until}")
        sets.append(f"{builder.name('ttl')} = {builder.value('queue_ttl', number_attr(entry.retain_until))}")
        sets.append(f"queue_providers = {builder.value('queue_providers', string_attr(','.join(entry.providers)))}")
        sets.append(f"queue_wait = {builder.value('queue_wait', string_attr(QUEUE_WAITS[entry.capacity]))}")
        if entry.env is not None:
            sets.append(f"queue_env = {builder.value('queue_env', string_attr(entry.env))}")
        removes += ["held_counters", "starting_shard"]
    elif write is Write.LEAVE_QUEUE:
        removes += list(QUEUE_ATTRIBUTES)
    elif write is Write.UNADMIT:
        entry = _required(inputs.queue, "queue")
        sets.append(f"created_epoch = {builder.value('created', number_attr(entry.created))}")
        removes += ["admitted_epoch", "admission_id"]
    elif write is Write.RETRY_LATER:
        entry = _required(inputs.queue, "queue")
        sets.append(f"retry_epoch = {builder.value('retry_at', number_attr(entry.retry_at))}")
        sets.append(f"failed_admissions = {builder.value('failures', number_attr(entry.failures))}")
    elif write is Write.ADMITTED:
        now = builder.value("now", number_attr(inputs.now))
        sets.append(f"admitted_epoch = {now}")
        sets.append(f"created_epoch = {now}")
        sets.append(f"provider = {builder.value('provider', string_attr(_required(inputs.provider, 'provider')))}")
        sets.append(f"starting_shard = {builder.value('shard', string_attr(_required(inputs.shard, 'shard')))}")
        admission = string_attr(_required(inputs.admission_id, "admission_id"))
        sets.append(f"admission_id = {builder.value('admission_id', admission)}")
    elif write is Write.NOTICE:
        notice = _required(inputs.notice, "notice")
        at = builder.value("preempt_at", number_attr(notice.preempt_at))
        sets.append(f"preempt_epoch = {at}")
        sets.append(f"due_at = {at}")
        sets.append(f"preempted_for = {builder.value('preemptor', string_attr(notice.preemptor))}")
        sets.append(f"preempt_priority = {builder.value('preempt_priority', number_attr(notice.priority))}")


def _required(value: _T | None, what: str) -> _T:
    if value is None:
        raise ValueError(f"the transition needs {what}")
    return value
