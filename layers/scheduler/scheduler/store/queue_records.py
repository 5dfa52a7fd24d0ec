"""The queue's write records: where a lease sits in the queue (`QueueEntry`, what ENTER_QUEUE writes) and a
preemption notice (`NoticeRecord`, what NOTICE writes). Their own module, imported where they are built: a
NamedTuple class costs a function's init, and one that only reads leases never builds these.
"""

from __future__ import annotations

from typing import NamedTuple

# What LEAVE_QUEUE removes: the queue index's keys and what only a waiting lease says (RETRY_LATER's included: an
# admission reads the count with the queued lease and hands it to its requeue).
QUEUE_ATTRIBUTES = ("queue_shard", "queue_order", "queue_reason", "queue_wait", "retry_epoch", "failed_admissions")
# What a queued lease waits for (`queue_wait`): a provider's room (a lease of lower priority yields to it), or its
# owner's own quota or budget.
QUEUE_WAITS = {True: "capacity", False: "owner"}


class QueueEntry(NamedTuple):
    """What ENTER_QUEUE writes: where the lease sits in the queue and what it waits for."""

    shard: str
    order: int  # the queue index's sort key (`queue_order`): priority, then age
    until: int  # queued_until (epoch seconds): its expires_at and due_at while it waits
    retain_until: int  # its TTL while it waits (past queued_until: the sweep ends it first)
    reason: str  # what it waits for, as a caller is told
    providers: tuple[str, ...]  # the providers that could serve it, in policy order: the capacity it waits for
    capacity: bool  # it waits for a provider's room (else for its owner's quota or budget)
    env: str | None = None  # the worker environment (JSON) it is provisioned with once admitted
    created: int = 0  # UNADMIT: when the lease was made (epoch seconds), put back by a requeue
    failures: int = 0  # RETRY_LATER: the failed admissions so far, this one included
    retry_at: int = 0  # RETRY_LATER: no admission before it (epoch seconds)


class NoticeRecord(NamedTuple):
    """What NOTICE writes: when the lease is preempted, and for which queued lease."""

    preempt_at: int  # epoch seconds
    preemptor: str  # the queued lease's id
    priority: int  # the preemptor's priority (the preempted lease's reason says it)
