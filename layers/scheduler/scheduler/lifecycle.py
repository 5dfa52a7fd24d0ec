"""The lease state machine, declared once: statuses, the transitions between them, and what each writes.

Pure Python (no DynamoDB, no pydantic). The store renders every condition and update expression
from these declarations (`store/conditions.py`) and asks `refusal()` why a conditional write lost,
so adding a status or a transition is an edit here, checked by tests that need no database.

    queued ──admit──▶ pending ──activate──▶ active ──renew──▶ active ──notice──▶ active (preempt_at)
      ▲ │ cancel /            │  │                │                              │
      │ │ expire_queued       │  │ fail_pending   │ claim_release (caller) /     │ claim_preempted
      │ ▼                     │  ▼                │ claim_due (sweep) /          │ (at preempt_at)
      │ released | expired    │ failed            ▼ claim_failed (worker stopped) ▼
      └──────── requeue ──────┘             releasing ──finish──▶ released | expired | failed | preempted

A `queued` lease waits for capacity (a cap, a quota, a budget, a provider with room): it holds no counter and
no worker, and sits in the queue index (by priority, then age) and in the sweep index (due at queued_until).
`admit` takes its slots in the same transaction as `record` takes a new lease's; a provisioning that found no
capacity puts it back (`requeue`, giving the slots back) until its queued_until, as it was before its admission
(UNADMIT) and not to be tried again before a backoff (RETRY_LATER): a provider that cannot serve it now (a host
without its GPU) is not asked on every admission pass. `cancel` (a caller's DELETE)
and `expire_queued` (the sweep, at queued_until) end it without any worker ever made, so without a claim.
`notice` marks a preemptible active lease for preemption at preempt_at (its renewals held before it); at
preempt_at the sweep's `claim_preempted` ends it `preempted`, and the finish of that claim hands its provider
slot to the queued lease that caused it, admitting it in the same transaction (`store/queue.py`).

An active lease's worker is `starting` until its provider reports it usable, then `ready` (`ready_at`
written once, by `mark_ready`); `check_readiness` is the claim that lets one caller at a time ask the
provider. A worker that fails to boot (ERROR/EXITED while starting, or never ready within
READY_TIMEOUT_SECONDS) is ended through `claim_boot_failed`, which only a still-starting lease takes.
The sweep warns of an active lease's coming expiry once per expiry (`warn_expiry`: the mark names the expiry
warned of, so a renewal, which moves the expiry, makes room for the next warning); the leases table's stream
turns the mark into the `lease.expiring` event (`scheduler.events`).

A lease is *live* (it may own a worker, and sits in the sweep index) while pending, active or
releasing. Every end goes through a claim (`releasing`) first, except `fail_pending` (acquire gave
up and removed the worker itself), so two actors can never both release one worker.

The audit trail is written by the same transitions: `created_by` with the new item, `claimed_by` with a claim
(kept by a claim that takes over a stale one, as its outcome is), `ended_by` with the end, `renewed_by` with a
renewal and `ready_by` with `mark_ready` (a worker ready at once is its acquirer's, `created_by`), so the events
read from the table's stream name who acted.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import NamedTuple


class LeaseStatus(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    RELEASING = "releasing"
    RELEASED = "released"
    EXPIRED = "expired"
    FAILED = "failed"
    QUEUED = "queued"
    PREEMPTED = "preempted"

    @property
    def is_live(self) -> bool:
        """Live leases may still own a worker; terminal ones never do."""
        return self in LIVE


class WorkerState(StrEnum):
    """Whether an active lease's worker is usable yet (a pending lease's is `starting`)."""

    STARTING = "starting"
    READY = "ready"


# What may own a worker (and hold counters): every live lease but a queued one, which holds neither.
HOLDING = frozenset({LeaseStatus.PENDING, LeaseStatus.ACTIVE, LeaseStatus.RELEASING})
LIVE = HOLDING | {LeaseStatus.QUEUED}
ENDED = frozenset(LeaseStatus) - LIVE
# What `GET /v1/leases` lists: every live lease, each as long as its caller needs to see it. A queued lease
# until its queued_until (its expires_at while it waits); a pending or active lease until its expires_at: past
# it the lease is over for its caller (renew and release answer 404) and the sweep's to end, within a sweep
# period. A releasing lease until its worker is confirmed gone, whatever its expiry: its worker may still exist
# and bill (a provider that cannot remove it keeps it here).
LISTED_UNTIL_EXPIRY = frozenset({LeaseStatus.PENDING, LeaseStatus.ACTIVE, LeaseStatus.QUEUED})
LISTED_UNTIL_ENDED = frozenset({LeaseStatus.RELEASING})


class Guard(Enum):
    """A condition a transition checks besides the lease's status, in the same write."""

    NOT_EXPIRED = "the lease has not run past expires_at"
    DUE = "the lease's due time (expiry, or a stale claim's deadline) has passed"
    OWNER = "the caller is the lease's owner (or the lease has none and the caller names none)"
    TOKEN = "the lease still holds this worker (the provider token the caller saw)"  # noqa: S105  # nosec B105
    CLAIM = "the caller holds the lease's current release claim"
    STARTING = "the lease's worker is still starting (never reported ready)"
    CHECK_DUE = "nobody asked the provider about the worker's readiness within the refresh interval"
    SEEN_EXPIRY = "the lease still expires when the caller read it (only when the caller read it)"
    WORKER_LIFE = "the new expiry is no later than the worker's own end (worker_ends_epoch), where it has one"
    NOT_WARNED = "no expiry warning was written for the expiry the caller read (warned_expiry is another or none)"
    NOTICE_LIFE = "the new expiry is no later than the lease's preempt_at, where it has a preemption notice"
    QUEUE_OPEN = "the lease may still wait in the queue (its queued_until has not passed)"
    PREEMPTIBLE = "the lease was acquired preemptible"
    LOWER_PRIORITY = "the lease's priority is strictly lower than the preemptor's"
    RAN_MIN_RUNTIME = "the lease has run at least MIN_RUNTIME_SECONDS (since it was made, or admitted)"
    NO_NOTICE = "the lease has no preemption notice yet"
    OUTLIVES_NOTICE = "the lease would still run at the notice's end (it expires after preempt_at)"
    NOTICE_DUE = "the lease's preempt_at has passed"


class Write(Enum):
    """What a transition writes on the lease item, besides its status."""

    ENTER_INDEX = "live_shard and due_at: the lease joins the sweep index (due at its expiry)"
    RECORD_WORKER = "provider, provider_token, endpoint, cost_per_hour, worker_ends_epoch (when the provider ends it)"
    EXTEND = "expires_at, due_at and the TTL move to now + ttl"
    HOLD_COUNTERS = "held_counters: the cap/quota slots the lease holds"
    TAKE_CLAIM = (
        "claim_id, release_outcome, claimed_by (who claims: a caller's name, sweep, ttl-stream, reconciler); due_at and"
        " the TTL move to the claim's deadline. A claim that keeps the outcome keeps claimed_by too (the end is the"
        " first claimant's)"
    )
    RECORD_REASON = "failure_reason"
    END = "released_at; the TTL moves to the end of retention"
    LEAVE_INDEX = (
        "live_shard, due_at, starting_shard, claim_id, release_outcome, claimed_by, held_counters removed, and what"
        " only a queued lease holds (the queue index keys, the worker environment it waits with)"
    )
    GIVE_BACK_COUNTERS = "every held cap/quota slot given back, in the same transaction"
    TAKE_COUNTERS = "a slot of each cap/quota taken, in the same transaction"
    WORKER_STATE = "worker_state: starting, or ready with ready_at when the provider says it runs at once"
    CHECKED = "ready_checked_epoch: when a caller last asked the provider about readiness"
    READY = "worker_state ready and ready_at, starting_shard removed (once: only a starting lease takes it)"
    CREATED_BY = "created_by: the caller whose acquire recorded the lease (with the new item; never changed)"
    ENDED_BY = "ended_by: who ended the lease (a finished claim's claimed_by; fail_pending: whoever gave up on it)"
    RENEWED_BY = "renewed_by: the caller of the latest renewal (removed by a renewal that names nobody)"
    READY_BY = "ready_by: who found the worker ready (a reading caller's name, or sweep; written once, as ready_at)"
    WARN = "warned_expiry: the expiry the sweep warned of (the stream makes it the lease.expiring event)"
    REWEIGH_COUNTERS = (
        "held_counters re-weighed when budgets are held (the worker's own price at activate, an extension's"
        " spend at renew), the difference taken or given back in the same transaction"
    )
    ENTER_QUEUE = (
        "the queue index keys (queue_shard, queue_order: priority, then age), queue_reason, queue_providers (the"
        " capacity it waits for), queued_epoch (kept from its first time in the queue), the worker environment;"
        " expires_at and due_at at queued_until (the TTL past it by the retention), held_counters and"
        " starting_shard removed"
    )
    LEAVE_QUEUE = (
        "the queue index keys, queue_reason, queue_wait and a requeue's retry_epoch and failed_admissions removed"
    )
    ADMITTED = (
        "admitted_epoch and created_epoch = now (a lease bills, and its boot and pending deadlines count, from its"
        " admission), provider (whose slot it holds), starting_shard (the starting index), admission_id (this"
        " admission's own: a resent write that lost knows it had landed, and another admitter's is not taken for it)"
    )
    RETRY_LATER = (
        "retry_epoch: no admission before it (now + a backoff doubling with each failed admission: 2 s, 4 s, 8 s …"
        " up to 60 s) and failed_admissions (how many failed so far); both removed by LEAVE_QUEUE"
    )
    UNADMIT = (
        "what ADMITTED changed that a queued lease does not show: created_epoch put back (when the lease was made),"
        " admitted_epoch and admission_id removed"
    )
    NOTICE = "preempt_epoch, preempted_for (the preemptor's id) and preempt_priority; due_at moves to preempt_at"


class Transition(NamedTuple):
    """One allowed change of a lease.

    `source` None: the lease must not exist yet (a new item). `target` None: the claim's recorded
    outcome (finishing a release). `conflict_in`: statuses in which a refused caller is told the lease
    is busy (409) rather than gone (404). `outcome`: for a claim, how the release will be recorded;
    `keeps_outcome`: a claim taking over a stale one keeps the outcome that claim recorded.
    """

    name: str
    source: frozenset[LeaseStatus] | None
    target: LeaseStatus | None
    guards: tuple[Guard, ...] = ()
    writes: tuple[Write, ...] = ()
    conflict_in: frozenset[LeaseStatus] = frozenset()
    outcome: LeaseStatus | None = None
    keeps_outcome: bool = False
    verb: str = ""

    def allows(self, status: LeaseStatus | None) -> bool:
        """True when a lease in `status` (None: absent) may take this transition, guards aside."""
        return status is None if self.source is None else status in self.source


_P, _A, _R, _Q = LeaseStatus.PENDING, LeaseStatus.ACTIVE, LeaseStatus.RELEASING, LeaseStatus.QUEUED
_END = (Write.END, Write.ENDED_BY, Write.LEAVE_INDEX, Write.GIVE_BACK_COUNTERS)
# A queued lease ends without a worker ever made for it and without a counter held: no claim, nothing given back.
_END_QUEUED = (Write.END, Write.ENDED_BY, Write.LEAVE_INDEX, Write.RECORD_REASON)

RECORD = Transition(
    "record",
    None,
    _P,
    writes=(Write.ENTER_INDEX, Write.CREATED_BY, Write.HOLD_COUNTERS, Write.TAKE_COUNTERS),
    verb="recorded",
)
MOVE_SLOT = Transition("move_slot", frozenset({_P}), _P, writes=(Write.HOLD_COUNTERS,), verb="moved")
ACTIVATE = Transition(
    "activate",
    frozenset({_P}),
    _A,
    writes=(Write.RECORD_WORKER, Write.WORKER_STATE, Write.REWEIGH_COUNTERS),
    verb="activated",
)
FAIL_PENDING = Transition("fail_pending", frozenset({_P}), LeaseStatus.FAILED, writes=(*_END, Write.RECORD_REASON))
RENEW = Transition(
    "renew",
    frozenset({_A}),
    _A,
    guards=(Guard.NOT_EXPIRED, Guard.OWNER, Guard.SEEN_EXPIRY, Guard.WORKER_LIFE, Guard.NOTICE_LIFE),
    writes=(Write.EXTEND, Write.REWEIGH_COUNTERS, Write.RENEWED_BY),
    conflict_in=frozenset({_P, _R, _Q}),
    verb="renewed",
)
CLAIM_RELEASE = Transition(
    "claim_release",
    frozenset({_A}),
    _R,
    guards=(Guard.NOT_EXPIRED, Guard.OWNER),
    writes=(Write.TAKE_CLAIM,),
    outcome=LeaseStatus.RELEASED,
    verb="released",
)
CLAIM_DUE = Transition(
    "claim_due",
    HOLDING,
    _R,
    guards=(Guard.DUE,),
    writes=(Write.TAKE_CLAIM,),
    outcome=LeaseStatus.EXPIRED,
    keeps_outcome=True,
)
CLAIM_FAILED = Transition(
    "claim_failed",
    frozenset({_P, _A}),
    _R,
    guards=(Guard.TOKEN,),
    writes=(Write.TAKE_CLAIM, Write.RECORD_REASON),
    outcome=LeaseStatus.FAILED,
)
CHECK_READINESS = Transition(
    "check_readiness", frozenset({_A}), _A, guards=(Guard.STARTING, Guard.CHECK_DUE), writes=(Write.CHECKED,)
)
MARK_READY = Transition(
    "mark_ready",
    frozenset({_A}),
    _A,
    guards=(Guard.STARTING, Guard.TOKEN),
    writes=(Write.READY, Write.READY_BY),
    verb="ready",
)
CLAIM_BOOT_FAILED = Transition(
    "claim_boot_failed",
    frozenset({_A}),
    _R,
    guards=(Guard.STARTING, Guard.TOKEN),
    writes=(Write.TAKE_CLAIM, Write.RECORD_REASON),
    outcome=LeaseStatus.FAILED,
)
# SEEN_EXPIRY and NOT_WARNED bind the expiry the sweep read: a renewal in between makes the warning lose.
WARN_EXPIRY = Transition(
    "warn_expiry",
    frozenset({_A}),
    _A,
    guards=(Guard.NOT_EXPIRED, Guard.SEEN_EXPIRY, Guard.NOT_WARNED),
    writes=(Write.WARN,),
)
RECLAIM_TTL_DELETED = Transition(
    "reclaim_ttl_deleted", None, _R, writes=(Write.ENTER_INDEX, Write.TAKE_CLAIM), outcome=LeaseStatus.EXPIRED
)
# RECORD_REASON: a worker that counts as gone on an operator's word (its host retired) ends its lease saying so.
FINISH = Transition("finish", frozenset({_R}), None, guards=(Guard.CLAIM,), writes=(*_END, Write.RECORD_REASON))

ENQUEUE = Transition(
    "enqueue", None, _Q, writes=(Write.ENTER_INDEX, Write.ENTER_QUEUE, Write.CREATED_BY), verb="queued"
)
ADMIT = Transition(
    "admit",
    frozenset({_Q}),
    _P,
    guards=(Guard.NOT_EXPIRED,),
    writes=(Write.LEAVE_QUEUE, Write.ADMITTED, Write.EXTEND, Write.HOLD_COUNTERS, Write.TAKE_COUNTERS),
    verb="admitted",
)
REQUEUE = Transition(
    "requeue",
    frozenset({_P}),
    _Q,
    guards=(Guard.QUEUE_OPEN,),
    writes=(Write.ENTER_QUEUE, Write.UNADMIT, Write.RETRY_LATER, Write.GIVE_BACK_COUNTERS),
    verb="queued",
)
CANCEL = Transition(
    "cancel",
    frozenset({_Q}),
    LeaseStatus.RELEASED,
    guards=(Guard.NOT_EXPIRED, Guard.OWNER),
    writes=_END_QUEUED,
    verb="cancelled",
)
EXPIRE_QUEUED = Transition(
    "expire_queued", frozenset({_Q}), LeaseStatus.EXPIRED, guards=(Guard.DUE,), writes=_END_QUEUED
)
NOTICE = Transition(
    "notice",
    frozenset({_A}),
    _A,
    guards=(Guard.PREEMPTIBLE, Guard.LOWER_PRIORITY, Guard.RAN_MIN_RUNTIME, Guard.NO_NOTICE, Guard.OUTLIVES_NOTICE),
    writes=(Write.NOTICE,),
    verb="noticed",
)
# Its reason (by what priority) is recorded by the finish, which knows whether the slot went to the preemptor.
CLAIM_PREEMPTED = Transition(
    "claim_preempted",
    frozenset({_A}),
    _R,
    guards=(Guard.NOTICE_DUE,),
    writes=(Write.TAKE_CLAIM,),
    outcome=LeaseStatus.PREEMPTED,
)

TRANSITIONS: tuple[Transition, ...] = (
    RECORD,
    MOVE_SLOT,
    ACTIVATE,
    FAIL_PENDING,
    RENEW,
    CLAIM_RELEASE,
    CLAIM_DUE,
    CLAIM_FAILED,
    CHECK_READINESS,
    MARK_READY,
    CLAIM_BOOT_FAILED,
    WARN_EXPIRY,
    RECLAIM_TTL_DELETED,
    FINISH,
    ENQUEUE,
    ADMIT,
    REQUEUE,
    CANCEL,
    EXPIRE_QUEUED,
    NOTICE,
    CLAIM_PREEMPTED,
)


class Refusal(Enum):
    """Why a transition's conditional write did not apply, as the caller is told."""

    NOT_FOUND = "not_found"  # no such lease
    NOT_ACTIVE = "not_active"  # the lease is in a status the transition does not start from
    EXPIRED = "expired"  # it ran past expires_at (the sweep has not ended it yet)
    CONFLICT = "conflict"  # busy in a status that forbids this change now
    NOT_OWNER = "not_owner"  # owned by someone else
    PAST_WORKER_END = "past_worker_end"  # the new expiry would pass the end its provider gave the worker (409)
    PREEMPTING = "preempting"  # the new expiry would pass the lease's preemption notice (409 `preempting`)
    QUEUED = "queued"  # the lease waits in the queue, where this change does not apply (a release cancels it)
    CHANGED = "changed"  # another actor changed it first (no caller-facing meaning)


class Seen(NamedTuple):
    """The lease as it was when a write lost: only what the guards look at."""

    status: LeaseStatus
    expires_epoch: int
    owner_id: str | None = None
    worker_ends_epoch: int | None = None
    preempt_epoch: int | None = None


def refusal(
    transition: Transition,
    seen: Seen | None,
    now_epoch: int,
    owner: str | None = None,
    new_expiry: int | None = None,
) -> Refusal:
    """Why `transition` was refused for a lease found as `seen` (None: absent) — the one classification
    that release, renew and every other conditional write share. `new_expiry`: the expiry a renewal asked
    for (None: not known)."""
    if seen is None:
        return Refusal.NOT_FOUND
    expired = Guard.NOT_EXPIRED in transition.guards and seen.expires_epoch <= now_epoch
    # Past its expiry a live lease is gone to the caller whatever the sweep is doing with it: a renew
    # racing the sweep's claim must hear "expired" (404), not "busy" (409).
    if expired and seen.status.is_live:
        return Refusal.EXPIRED
    if seen.status in transition.conflict_in:
        return Refusal.CONFLICT
    if not transition.allows(seen.status):
        return Refusal.QUEUED if seen.status is LeaseStatus.QUEUED else Refusal.NOT_ACTIVE
    if Guard.OWNER in transition.guards and not owner_may_act(seen.owner_id, owner):
        return Refusal.NOT_OWNER
    notice = seen.preempt_epoch
    if Guard.NOTICE_LIFE in transition.guards and notice is not None and new_expiry is not None and new_expiry > notice:
        return Refusal.PREEMPTING
    ends = seen.worker_ends_epoch
    if Guard.WORKER_LIFE in transition.guards and ends is not None and new_expiry is not None and new_expiry > ends:
        return Refusal.PAST_WORKER_END
    return Refusal.CHANGED


def owner_may_act(lease_owner: str | None, caller: str | None) -> bool:
    """An owned lease needs its owner; a lease without one is open to a caller who names none or any."""
    return lease_owner is None or lease_owner == caller
