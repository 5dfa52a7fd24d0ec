"""The memory store answers as LeaseStore does: the same random walks of every state change, side by side on
DynamoDB (moto) and in memory, give the same answers, refusals, listings and counters at every step.

Beside it, what only the memory store has: its own paging tokens, and DynamoDB's TTL played on demand.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest

from scheduler import budgets
from scheduler.budgets import OwnerBudgets
from scheduler.errors import InvalidRequest, LeaseNotFound
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, ListFilter, WorkerKind
from scheduler.providers.base import ProvisionedWorker
from scheduler.store import Claim, LeaseStore
from scheduler.store.counters import Limit
from scheduler.store.memory import MemoryLeaseStore
from scheduler.store.memory.reads import MemoryReads
from scheduler.store.port import LeaseStorePort
from scheduler.store.queue_model import Handover, QueueWait
from scheduler.store.queue_records import NoticeRecord

from .builders import NOW, RETENTION_SECONDS, Leases, epoch, new_lease
from .conftest import memory_store

OWNERS = ("alice", "bob", None)
BUDGETS = OwnerBudgets(per_hour=2.0, per_day=6.0, release_lag_seconds=90)
STEPS = 100


class Twins:
    """One walk on both stores: each step's answer from each, compared."""

    def __init__(self, dynamodb: LeaseStore, memory: MemoryLeaseStore, rng: random.Random) -> None:
        self.stores: tuple[LeaseStorePort, LeaseStorePort] = (dynamodb, memory)
        self.rng = rng
        self.now = NOW
        self.ids: list[str] = []
        self.claims: dict[str, tuple[Claim, Claim]] = {}
        self.owners: dict[str, str | None] = {}
        self.status: dict[str, LeaseStatus] = {}  # as the last read of each lease found it
        self.seen: defaultdict[str, list[Any]] = defaultdict(list)  # every step's answer, by step

    def both(self, step: str, call: Callable[[LeaseStorePort], Any]) -> tuple[Any, Any]:
        answers = tuple(_answer(lambda store=store: call(store)) for store in self.stores)
        assert answers[0] == answers[1], f"{step} at {self.now}: DynamoDB {answers[0]!r}, memory {answers[1]!r}"
        self.seen[step].append(answers[0])
        if isinstance(answers[0], Lease):
            self.status[answers[0].lease_id] = answers[0].status
        return answers[0], answers[1]

    def step(self, number: int) -> None:
        big = self.rng.random() < 0.05  # past expiries, stale claims, readiness intervals, midnight
        self.now += timedelta(seconds=self.rng.choice((61, 121, 700, 4000) if big else (0, 1, 2, 5, 10, 31)))
        if len(self.ids) < 4 or self.rng.random() < 0.15:
            self.create()
        else:
            live = [lease_id for lease_id in self.ids if lease_id in self.status and self.status[lease_id].is_live]
            lease_id = self.rng.choice(live if live and self.rng.random() < 0.8 else self.ids)
            likely = self.changes.get(self.status.get(lease_id), ())
            self.rng.choice(likely if likely and self.rng.random() < 0.8 else self.every)(self, lease_id)
            self.both("get", lambda store: store.get(lease_id))
        if number % 8 == 7:
            self.compare_reads()

    def create(self) -> None:
        if self.rng.random() < 0.3:
            self.enqueue()
            return
        lease = self._new().replace(queued_until=self.now + timedelta(seconds=600) if self.rng.random() < 0.3 else None)
        limits = [Limit.for_provider(lease.provider, 5), Limit.for_owner(budgets.budget_owner(lease.owner_id), 3)]
        if self.rng.random() < 0.5:
            limits += BUDGETS.limits(lease.owner_id, 0.5, lease.ttl_seconds, epoch(self.now))
        self.ids.append(lease.lease_id)
        self.owners[lease.lease_id] = lease.owner_id
        self.both("create_pending", lambda store: store.create_pending(lease, limits))

    def _new(self) -> Lease:
        return new_lease(
            owner_id=self.rng.choice(OWNERS),
            kind=self.rng.choice(list(WorkerKind)),
            provider=self.rng.choice(("local-docker", "runpod")),
            ttl_seconds=self.rng.choice((300, 3600, 14_400)),
            created_at=self.now,
        ).replace(priority=self.rng.choice((10, 50, 90)), preemptible=self.rng.random() < 0.6)

    def enqueue(self) -> None:
        made = self._new()
        until = self.now + timedelta(seconds=self.rng.choice((300, 1200)))
        lease = made.replace(status=LeaseStatus.QUEUED, queued_at=self.now, queued_until=until, expires_at=until)
        env = {"SCENE": "intro"} if self.rng.random() < 0.5 else None
        wait = QueueWait("waits", (lease.provider,), self.rng.random() < 0.7, env)
        self.ids.append(lease.lease_id)
        self.owners[lease.lease_id] = lease.owner_id
        self.both("enqueue", lambda store: store.queue.enqueue(lease, wait))

    def admit(self, lease_id: str) -> None:
        found = _raw(lambda: self.stores[0].get(lease_id))
        if not isinstance(found, Lease):
            return
        provider = self.rng.choice(("local-docker", "runpod"))
        draft = found.replace(
            status=LeaseStatus.PENDING,
            provider=provider,
            created_at=self.now,
            expires_at=self.now + timedelta(seconds=found.ttl_seconds),
            admitted_at=self.now,
        )
        limits = [Limit.for_provider(provider, 5), Limit.for_owner(budgets.budget_owner(found.owner_id), 3)]
        chosen = limits if self.rng.random() < 0.7 else []
        self.both("admit", lambda store: store.queue.admit(draft, chosen))

    def requeue(self, lease_id: str) -> None:
        found = _raw(lambda: self.stores[0].get(lease_id))
        if not isinstance(found, Lease):
            return
        held = self.both("held_counters", lambda store: store.held_counters(lease_id))[0]
        wait = QueueWait("no provider had room", (found.provider,), True)
        self.both("requeue", lambda store: store.queue.requeue(found, self.now, held, wait))

    def cancel(self, lease_id: str) -> None:
        owner = self.owner(lease_id)
        self.both("cancel_queued", lambda store: store.queue.cancel_queued(lease_id, owner, self.now, by="anim"))
        self.both(
            "expire_queued", lambda store: store.queue.expire_queued(lease_id, self.now, "not admitted", by="sweep")
        )

    def notice(self, lease_id: str) -> None:
        record = NoticeRecord(epoch(self.now) + self.rng.choice((60, 120)), self.rng.choice(self.ids), 60)
        record = record._replace(priority=self.rng.choice((20, 60, 100)))
        ran_since = epoch(self.now) - self.rng.choice((0, 300, 3600))
        self.both("notice", lambda store: store.queue.notice(lease_id, self.now, record, ran_since))

    def activate(self, lease_id: str) -> None:
        price = self.rng.choice((None, 0.25, 0.9))
        worker = ProvisionedWorker(f"ctr-{lease_id[:8]}", "http://w", price, ready=self.rng.random() < 0.5)
        held = self.both("held_counters", lambda store: store.held_counters(lease_id))[0]
        created = self._created(lease_id)
        reweighed = None
        if created is not None and any(entry.startswith("cost#") for entry in held):
            lifetime = self._lifetime(lease_id)
            reweighed = BUDGETS.reweigh(held, price or 0.0, lifetime, created)
        self.both("activate", lambda store: store.activate(lease_id, "local-docker", worker, self.now, reweighed))

    def fail_pending(self, lease_id: str) -> None:
        held = self.both("held_counters", lambda store: store.held_counters(lease_id))[0]
        self.both("fail_pending", lambda store: store.fail_pending(lease_id, self.now, held, reason="gave up"))

    def owner(self, lease_id: str) -> str | None:
        """Mostly the lease's owner; sometimes anyone."""
        return self.owners[lease_id] if self.rng.random() < 0.7 else self.rng.choice(OWNERS)

    def preempt(self, lease_id: str) -> None:
        """A noticed lease, its notice run out: claimed to be preempted (then finished, its slot handed over)."""
        found = _raw(lambda: self.stores[0].get(lease_id))
        if isinstance(found, Lease) and found.preempt_at is not None:
            self.now = max(self.now, found.preempt_at)
            self.claim(lease_id, "preempted")
            self.finish(lease_id)
        else:
            self.notice(lease_id)

    def claim(self, lease_id: str, kind: str | None = None) -> None:
        owner = self.owner(lease_id)
        kind = kind or self.rng.choice(("release", "due", "failed", "boot", "preempted"))
        token = f"ctr-{lease_id[:8]}"

        def claim(store: LeaseStorePort) -> Claim | None:
            if kind == "release":
                return store.claim_release(lease_id, owner, self.now)
            if kind == "due":
                return store.claim_due(lease_id, self.now)
            if kind == "boot":
                return store.claim_boot_failed(lease_id, self.now, token=token, reason="no boot")
            if kind == "preempted":
                return store.claim_preempted(lease_id, self.now, by="sweep")
            status = self.rng.choice((LeaseStatus.PENDING, LeaseStatus.ACTIVE))
            return store.claim_failed(lease_id, self.now, status=status, token=None, reason="gone")

        state = self.rng.getstate()
        answers = []
        for store in self.stores:
            self.rng.setstate(state)  # the same choices inside `claim` on both
            answers.append(_raw(lambda store=store: claim(store)))
        assert _normal(answers[0]) == _normal(answers[1]), f"claim_{kind} at {self.now}: {answers}"
        self.seen[f"claim_{kind}"].append(_normal(answers[0]))
        if isinstance(answers[0], Claim) and isinstance(answers[1], Claim):
            self.claims[lease_id] = (answers[0], answers[1])

    def finish(self, lease_id: str) -> None:
        if lease_id not in self.claims:
            return
        claims = self.claims[lease_id]
        waiting = [item.lease for item in self.stores[0].queue.queued_leases()]
        if claims[0].outcome is LeaseStatus.PREEMPTED and waiting and self.rng.random() < 0.7:
            self.hand_over(claims, self.rng.choice(waiting))
            return
        pairs = zip(self.stores, claims, strict=True)
        answers = [
            _answer(lambda store=store, claim=claim: store.finish_release(claim, self.now)) for store, claim in pairs
        ]
        assert answers[0] == answers[1], f"finish_release at {self.now}: {answers}"
        self.seen["finish_release"].append(answers[0])

    def hand_over(self, claims: tuple[Claim, Claim], preemptor: Lease) -> None:
        victim = claims[0].lease
        admitted = preemptor.replace(
            status=LeaseStatus.PENDING,
            provider=victim.provider,
            created_at=self.now,
            expires_at=self.now + timedelta(seconds=preemptor.ttl_seconds),
            admitted_at=self.now,
        )
        quota = Limit.for_owner(budgets.budget_owner(preemptor.owner_id), 3)
        handover = Handover(admitted, Limit.for_provider(victim.provider, 5).counter, (quota,))
        pairs = zip(self.stores, claims, strict=True)
        answers = [
            _answer(lambda store=store, claim=claim: store.queue.finish_preempted(claim, self.now, handover, "by 60"))
            for store, claim in pairs
        ]
        assert answers[0] == answers[1], f"finish_preempted at {self.now}: {answers}"
        self.seen["finish_preempted"].append(answers[0])

    def renew(self, lease_id: str) -> None:
        owner, ttl = self.owner(lease_id), self.rng.choice((None, 60, 7200))
        if self.rng.random() < 0.5:
            self.both("renew", lambda store: store.renew(lease_id, owner, ttl, self.now))
        else:
            self.both("renew_reserving", lambda store: store.renew_reserving(lease_id, owner, ttl, self.now, BUDGETS))

    def readiness(self, lease_id: str) -> None:
        token = f"ctr-{lease_id[:8]}"
        self.both("claim_readiness_check", lambda store: store.claim_readiness_check(lease_id, self.now, 30))
        self.both("mark_ready", lambda store: store.mark_ready(lease_id, token, self.now))
        self.both("index_starting", lambda store: store.index_starting(lease_id))

    def move(self, lease_id: str) -> None:
        held = self.both("held_counters", lambda store: store.held_counters(lease_id))[0]
        old = next((entry for entry in held if entry.startswith("provider#")), None)
        new = Limit.for_provider(self.rng.choice(("local-docker", "runpod", "modal")), 3)
        self.both("move_slot", lambda store: store.move_slot(lease_id, held, old, new if new.counter != old else None))

    # What is tried on a lease: mostly what its status allows, sometimes anything (refusals are compared too).
    every: ClassVar[tuple[Callable[[Twins, str], None], ...]] = (
        activate,
        fail_pending,
        claim,
        finish,
        renew,
        readiness,
        move,
        admit,
        requeue,
        cancel,
        notice,
        preempt,
    )
    changes: ClassVar[dict[LeaseStatus, tuple[Callable[[Twins, str], None], ...]]] = {
        LeaseStatus.PENDING: (activate, activate, activate, fail_pending, move, claim, requeue),
        LeaseStatus.ACTIVE: (claim, claim, renew, renew, readiness, activate, notice, preempt, preempt),
        LeaseStatus.RELEASING: (finish, finish, claim),
        LeaseStatus.QUEUED: (admit, admit, cancel, claim, renew),
    }

    def compare_reads(self) -> None:
        for lease_id in self.ids:
            self.both("get", lambda store, lease_id=lease_id: store.get(lease_id))
        query = ListFilter(owner_id=self.rng.choice(OWNERS), limit=self.rng.choice((1, 2, 100)))
        self.both("list_live", lambda store: sorted(_listing(store, query, self.now)))
        self.both("due_leases", lambda store: sorted(lease.lease_id for lease in store.due_leases(self.now)))
        self.both("live_leases", lambda store: sorted(lease.lease_id for lease in store.live_leases()))
        self.both("starting_leases", lambda store: sorted(lease.lease_id for lease in store.starting_leases()))
        self.both("live_holds", lambda store: sorted(store.live_holds()))
        self.both("counter_states", lambda store: store.counter_states())
        days = ("2026-11-01", "2026-12-31")
        self.both("usage_rows", lambda store: sorted(store.usage_rows(None, *days)))
        self.both("queued_leases", lambda store: list(store.queue.queued_leases()))
        self.both("running_leases", lambda store: sorted(store.queue.running_leases()))
        priority = self.rng.choice((0, 50, 90))
        self.both("queue_ahead", lambda store: store.queue.queue_ahead(priority))

    def summary(self) -> str:
        """How each step answered (what the walk covered)."""
        kinds: Counter[str] = Counter()
        for step, answers in self.seen.items():
            for answer in answers:
                raised = isinstance(answer, tuple) and answer and answer[0] == "raised"
                kinds[f"{step}: {answer[1] if raised else type(answer).__name__}"] += 1
        return "\n".join(f"{count:4} {kind}" for kind, count in sorted(kinds.items()))

    def _created(self, lease_id: str) -> int | None:
        try:
            return epoch(self.stores[0].get(lease_id).created_at)
        except LeaseNotFound:
            return None

    def _lifetime(self, lease_id: str) -> int:
        lease = self.stores[0].get(lease_id)
        return epoch(lease.expires_at) - epoch(lease.created_at)


def _listing(store: LeaseStorePort, query: ListFilter, now: datetime) -> list[str]:
    ids: list[str] = []
    token: str | None = None
    for _ in range(200):
        page, token = store.list_live(query._replace(next_token=token), now)
        ids += [lease.lease_id for lease in page]
        if token is None:
            return ids
    raise AssertionError("the listing did not end")


def _raw(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as error:  # the refusal is the answer compared
        return error


def _normal(answer: Any) -> Any:
    if isinstance(answer, Exception):
        return ("raised", type(answer).__name__, str(answer))
    if isinstance(answer, Claim):
        return ("claim", answer.lease, answer.outcome, answer.held_counters, answer.preempted_for)
    return answer


def _answer(call: Callable[[], Any]) -> Any:
    return _normal(_raw(call))


@pytest.mark.moto_only("the walk takes transactions")
@pytest.mark.dynamodb_only("compares the memory store with LeaseStore on DynamoDB")
@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(2, 10))])
def test_a_random_walk_answers_the_same_on_dynamodb_and_in_memory(budget_store: LeaseStore, seed: int) -> None:
    twins = Twins(budget_store, memory_store(counters=True, usage=True), random.Random(seed))
    for number in range(STEPS):
        twins.step(number)
    twins.compare_reads()
    print(twins.summary())


# --- what the memory store keeps of its own -------------------------------------------------------------


def test_a_token_of_the_memory_store_continues_its_listing() -> None:
    store = memory_store()
    leases = Leases(store)
    ids = [leases.active(ttl_seconds=600 + index).lease_id for index in range(3)]
    first, token = store.list_live(ListFilter(limit=2), NOW)
    rest, end = store.list_live(ListFilter(limit=2, next_token=token), NOW)
    assert ([lease.lease_id for lease in first + rest], end) == (ids, None)


def test_a_memory_token_at_a_position_of_no_lease_pages_on() -> None:
    store = memory_store()
    lease = Leases(store).active(ttl_seconds=3600)
    token = MemoryReads()._encode_token(0, (1, "00000000-0000-4000-8000-000000000000"))
    page, end = store.list_live(ListFilter(next_token=token), NOW)
    assert ([listed.lease_id for listed in page], end) == ([lease.lease_id], None)


@pytest.mark.parametrize("position", [(-1, "00000000-0000-4000-8000-000000000000"), (5, "x")])
def test_a_memory_token_at_no_position_of_the_index_is_invalid_request(position: tuple[int, str]) -> None:
    token = MemoryReads()._encode_token(0, position)
    with pytest.raises(InvalidRequest):
        memory_store().list_live(ListFilter(next_token=token), NOW)


def test_an_ended_lease_reads_back_until_its_retention_is_over() -> None:
    store = memory_store()
    lease = Leases(store).released(at=NOW)
    assert store.expire_ttl(NOW + timedelta(seconds=RETENTION_SECONDS)) == []
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASED


def test_ttl_takes_an_ended_lease_once_its_retention_is_over() -> None:
    store = memory_store()
    lease = Leases(store).released(at=NOW)
    (image,) = store.expire_ttl(NOW + timedelta(seconds=RETENTION_SECONDS + 1))
    assert image["lease_id"] == {"S": lease.lease_id}
    with pytest.raises(LeaseNotFound):
        store.get(lease.lease_id)


def test_a_live_lease_ttl_takes_past_its_expiry_comes_back_as_an_expiry_claim() -> None:
    store = memory_store()
    lease = Leases(store).active(ttl_seconds=60)
    (image,) = store.expire_ttl(lease.expires_at + timedelta(seconds=1))
    claim = store.reclaim_ttl_deleted(image, lease.expires_at + timedelta(seconds=1))
    assert claim is not None and claim.outcome == LeaseStatus.EXPIRED
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASING


def test_a_step_that_would_touch_one_counter_twice_is_refused_as_dynamodb_refuses_it() -> None:
    store = memory_store(counters=True)
    lease = new_lease()
    with pytest.raises(ValueError, match="once"):
        store.create_pending(lease, [Limit("provider#local-docker", 3), Limit("provider#local-docker", 5)])
    with pytest.raises(LeaseNotFound):
        store.get(lease.lease_id)


def test_limits_without_a_counters_table_are_refused_as_on_dynamodb() -> None:
    with pytest.raises(RuntimeError, match="COUNTERS_TABLE"):
        memory_store().create_pending(new_lease(), [Limit("provider#local-docker", 3)])
