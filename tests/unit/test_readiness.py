"""Worker readiness: a lease is `starting` until its provider says the worker serves; a worker that never boots
ends its lease `failed` and is removed, whether someone polls or not."""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.leases import readiness
from scheduler.leases.readiness import BOOT_ERROR, BOOT_TIMEOUT, ReadinessPolicy, check_starting_leases, wait_ready
from scheduler.leases.reads import get_when_ready
from scheduler.lifecycle import LeaseStatus, WorkerState
from scheduler.models import Lease, WorkerKind
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore

from .builders import NOW, Leases, acquire, context, memory_provider, registry_of
from .stored import remove_attribute, stored_items

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=3600, owner_id="alice")
POLICY = ReadinessPolicy(timeout_seconds=600)


class _Time:
    """A clock and a sleep that only move when the code under test sleeps."""

    def __init__(self, start: datetime = NOW) -> None:
        self.now = start
        self.monotonic_now = 0.0
        self.slept: list[float] = []
        self.on_sleep: list[object] = []

    def clock(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.monotonic_now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.monotonic_now += seconds
        self.now += timedelta(seconds=seconds)
        for action in self.on_sleep:
            action()  # type: ignore[operator]


def _booting(store: LeaseStore, provider: MemoryProvider) -> Lease:
    return acquire(context(store, registry_of(provider), clock=lambda: NOW), REQUEST)


def test_a_lease_whose_worker_boots_comes_back_active_and_starting(store: LeaseStore) -> None:
    lease = _booting(store, memory_provider(boots=True))
    assert (lease.status, lease.worker_state, lease.ready_at) == (LeaseStatus.ACTIVE, WorkerState.STARTING, None)


def test_a_worker_usable_at_once_is_ready_at_activation(store: LeaseStore) -> None:
    lease = _booting(store, memory_provider())
    assert (lease.worker_state, lease.ready_at) == (WorkerState.READY, NOW)


def test_a_pending_lease_reads_starting(leases: Leases) -> None:
    assert leases.pending().worker_state == WorkerState.STARTING


def test_wait_ready_returns_as_soon_as_the_worker_is_up(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    time = _Time()
    time.on_sleep.append(lambda: provider.boot(str(lease.provider_token)) if time.monotonic_now >= 3 else None)

    waited = wait_ready(
        context(store, registry_of(provider), clock=time.clock),
        lease.lease_id,
        20,
        POLICY,
        sleep=time.sleep,
        monotonic=time.monotonic,
    )

    assert waited.became_ready and waited.lease.worker_state == WorkerState.READY
    assert waited.lease.ready_at is not None and 3 <= (waited.lease.ready_at - NOW).total_seconds() <= 4
    assert time.monotonic_now < 20


def test_wait_ready_answers_the_current_state_after_the_wait(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    time = _Time()

    waited = wait_ready(
        context(store, registry_of(provider), clock=time.clock),
        lease.lease_id,
        5,
        POLICY,
        sleep=time.sleep,
        monotonic=time.monotonic,
    )

    assert waited.lease.worker_state == WorkerState.STARTING and not waited.became_ready
    assert sum(time.slept) == 5


def test_the_provider_is_asked_at_most_once_every_couple_of_seconds_per_lease(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    providers = registry_of(provider)
    for _ in range(10):  # ten callers polling in the same second
        readiness.refresh(context(store, providers, clock=lambda: NOW), store.get(lease.lease_id), POLICY)
    assert len(provider.readiness_calls) == 1
    later = NOW + timedelta(seconds=3)
    readiness.refresh(context(store, providers, clock=lambda: later), store.get(lease.lease_id), POLICY)
    assert len(provider.readiness_calls) == 2


def test_ready_at_is_written_once(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    provider.boot(str(lease.provider_token))
    first = readiness.refresh(
        context(store, registry_of(provider), clock=lambda: NOW), store.get(lease.lease_id), POLICY
    )
    assert store.mark_ready(lease.lease_id, str(lease.provider_token), NOW + timedelta(seconds=30)) is None
    assert store.get(lease.lease_id).ready_at == first.lease.ready_at == NOW


def test_a_ready_lease_is_never_refreshed_again(store: LeaseStore) -> None:
    provider = memory_provider()
    lease = _booting(store, provider)
    read = get_when_ready(context(store, registry_of(provider)), lease.lease_id, 25, lambda: POLICY)
    assert read.lease.worker_state == WorkerState.READY and provider.readiness_calls == []


def test_a_worker_that_fails_to_boot_ends_its_lease_failed_on_read_and_is_removed(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    provider.fail_boot(str(lease.provider_token), "the RunPod pod p1 is ERROR (it failed to boot)")

    read = get_when_ready(context(store, registry_of(provider), clock=lambda: NOW), lease.lease_id, 0, lambda: POLICY)

    assert read.lease.status == LeaseStatus.FAILED and read.boot_failure == BOOT_ERROR
    assert read.lease.failure_reason == "the RunPod pod p1 is ERROR (it failed to boot)"
    assert provider.workers == {}


def test_the_sweep_ends_a_boot_failure_nobody_polls(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    provider.fail_boot(str(lease.provider_token))

    report = check_starting_leases(context(store, registry_of(provider), clock=lambda: NOW), POLICY)

    assert [(ended.lease_id, why) for ended, why in report.failed] == [(lease.lease_id, BOOT_ERROR)]
    assert store.get(lease.lease_id).status == LeaseStatus.FAILED and provider.workers == {}


def test_the_sweep_records_a_booted_worker_ready(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    provider.boot(str(lease.provider_token))

    report = check_starting_leases(
        context(store, registry_of(provider), clock=lambda: NOW + timedelta(seconds=40)), POLICY
    )

    assert [ready.lease_id for ready in report.ready] == [lease.lease_id]
    assert store.get(lease.lease_id).ready_at == NOW + timedelta(seconds=40)


def test_a_worker_still_starting_after_the_ready_timeout_is_a_boot_failure(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)

    early = check_starting_leases(
        context(store, registry_of(provider), clock=lambda: NOW + timedelta(seconds=599)), POLICY
    )
    late = check_starting_leases(
        context(store, registry_of(provider), clock=lambda: NOW + timedelta(seconds=600)), POLICY
    )

    assert early.failed == [] and [why for _, why in late.failed] == [BOOT_TIMEOUT]
    ended = store.get(lease.lease_id)
    assert ended.status == LeaseStatus.FAILED and provider.workers == {}
    assert ended.failure_reason is not None and "not ready within 600 s (READY_TIMEOUT_SECONDS)" in ended.failure_reason


def test_an_unreachable_provider_leaves_the_lease_starting(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    provider.unreachable = True

    report = check_starting_leases(
        context(store, registry_of(provider), clock=lambda: NOW + timedelta(seconds=3600)), POLICY
    )

    assert report.failed == [] and report.errors and store.get(lease.lease_id).is_starting  # even past the timeout


def test_with_a_probe_path_ready_also_needs_the_probe_to_pass(store: LeaseStore) -> None:
    provider = memory_provider(boots=True, endpoint="http://127.0.0.1:9/")
    lease = _booting(store, provider)
    provider.boot(str(lease.provider_token))
    probed: list[str] = []
    answers = iter([False, True])

    def probe(url: str, timeout: float) -> bool:
        probed.append(url)
        return next(answers)

    policy = ReadinessPolicy(timeout_seconds=600, probe_path="/healthz", probe=probe)
    first = check_starting_leases(context(store, registry_of(provider), clock=lambda: NOW), policy)
    second = check_starting_leases(
        context(store, registry_of(provider), clock=lambda: NOW + timedelta(seconds=60)), policy
    )

    assert first.ready == [] and [ready.lease_id for ready in second.ready] == [lease.lease_id]
    assert probed == ["http://127.0.0.1:9/healthz"] * 2


def test_a_released_lease_cannot_be_failed_as_a_boot_failure(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    claim = store.claim_release(lease.lease_id, "alice", NOW)
    store.finish_release(claim, NOW)
    assert store.claim_boot_failed(lease.lease_id, NOW, token=str(lease.provider_token), reason="x") is None
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASED


def test_the_http_probe_passes_on_2xx_and_3xx_and_fails_otherwise() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Worker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response({"/ok": 200, "/moved": 302}.get(self.path, 503))
            self.send_header("Location", "/ok")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Worker)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        answers = [readiness.http_probe(base + path, 2.0) for path in ("/ok", "/moved", "/booting")]
    finally:
        server.shutdown()
        server.server_close()
    assert answers == [True, True, False]
    assert readiness.http_probe(base + "/ok", 0.5) is False  # nothing listens any more


def _in_starting_index(store: LeaseStore) -> set[str]:
    from scheduler.store import STARTING_INDEX

    return {item["lease_id"]["S"] for item in stored_items(store, STARTING_INDEX)}


def test_the_sweep_reads_only_leases_whose_worker_is_starting(store: LeaseStore) -> None:
    booting = memory_provider(boots=True)
    starting = _booting(store, booting)
    ready_at_once = _booting(store, memory_provider())
    booted = _booting(store, booting)
    booting.boot(str(booted.provider_token))
    check_starting_leases(context(store, registry_of(booting), clock=lambda: NOW), POLICY)

    assert _in_starting_index(store) == {starting.lease_id}
    assert ready_at_once.lease_id not in _in_starting_index(store)


def test_an_ended_lease_leaves_the_starting_index(store: LeaseStore) -> None:
    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    provider.fail_boot(str(lease.provider_token))

    check_starting_leases(context(store, registry_of(provider), clock=lambda: NOW), POLICY)

    assert _in_starting_index(store) == set()


def test_a_starting_lease_recorded_before_the_starting_index_enters_it_at_the_next_reconcile(store: LeaseStore) -> None:
    from scheduler.leases.reconcile import reconcile

    provider = memory_provider(boots=True)
    lease = _booting(store, provider)
    remove_attribute(store, lease.lease_id, "starting_shard")  # as a lease recorded before the index had it

    report = reconcile(
        context(store, registry_of(provider), clock=lambda: NOW, orphan_grace_seconds=60, pending_deadline_seconds=60)
    )

    assert (report.starting_indexed, _in_starting_index(store)) == ([lease.lease_id], {lease.lease_id})


def test_a_lease_already_in_the_starting_index_is_not_written_again(store: LeaseStore) -> None:
    lease = _booting(store, memory_provider(boots=True))
    assert store.index_starting(lease.lease_id) is False
