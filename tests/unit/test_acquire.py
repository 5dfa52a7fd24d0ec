"""Acquire walks the providers in PROVIDERS order and returns what happened as a value.

Each provider's answer is a decision (`policy.attempt`): capacity (unreachable included) moves on,
a refusal stops. The outcome says whether a lease row was written and ended, which is what the
handler counts (LeaseFailed once per lease that failed, never for a lease left to the reconciler).
"""

from __future__ import annotations

from scheduler.deadline import Deadline
from scheduler.errors import NoCapacity, ProviderFailed
from scheduler.leases.acquire import acquire
from scheduler.leases.outcomes import Acquired, NotAcquired
from scheduler.lifecycle import LeaseStatus
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import WorkerOutcomeUnknown
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore

from .builders import context, memory_provider, registry_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600, env={"QUALITY": "high"})


def test_the_first_provider_in_order_serves(store: LeaseStore) -> None:
    first, second = memory_provider("local-docker"), memory_provider("runpod")
    outcome = acquire(context(store, registry_of(first, second)), REQUEST)
    assert isinstance(outcome, Acquired) and outcome.lease.provider == "local-docker"
    assert second.provisioned == []


def test_the_served_lease_is_active_with_its_worker(store: LeaseStore) -> None:
    provider = memory_provider()
    outcome = acquire(context(store, registry_of(provider)), REQUEST)
    assert isinstance(outcome, Acquired)
    assert store.get(outcome.lease.lease_id).provider_token in provider.workers


def test_a_provider_that_cannot_serve_the_request_is_not_asked(store: LeaseStore) -> None:
    cpu_only, gpus = memory_provider("local-docker", gpus=frozenset({GpuClass.NONE})), memory_provider("runpod")
    outcome = acquire(context(store, registry_of(cpu_only, gpus)), REQUEST._replace(gpu=GpuClass.HIGH))
    assert isinstance(outcome, Acquired) and outcome.lease.provider == "runpod"
    assert cpu_only.provisioned == []


def test_no_capacity_falls_over_to_the_next_provider(store: LeaseStore) -> None:
    outcome = acquire(context(store, registry_of(memory_provider(full=True), memory_provider("runpod"))), REQUEST)
    assert isinstance(outcome, Acquired) and outcome.lease.provider == "runpod"


def test_an_unreachable_provider_falls_over_to_the_next(store: LeaseStore) -> None:
    outcome = acquire(
        context(store, registry_of(memory_provider(unreachable=True), memory_provider("runpod"))), REQUEST
    )
    assert isinstance(outcome, Acquired) and outcome.lease.provider == "runpod"


def test_no_provider_with_capacity_ends_the_lease_failed_naming_each(store: LeaseStore) -> None:
    outcome = acquire(
        context(store, registry_of(memory_provider(full=True), memory_provider("runpod", unreachable=True))), REQUEST
    )
    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, NoCapacity)
    assert outcome.error.details == {
        "providers": {"local-docker": "local-docker is full", "runpod": "runpod cannot be reached"},
        "lease_id": outcome.lease_id,
    }
    assert (outcome.ended, store.get(str(outcome.lease_id)).status) == (True, LeaseStatus.FAILED)


def test_a_refusal_stops_at_that_provider_and_ends_the_lease_failed(store: LeaseStore) -> None:
    refusing, next_one = memory_provider(refuse=True), memory_provider("runpod")
    outcome = acquire(context(store, registry_of(refusing, next_one)), REQUEST)
    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, ProviderFailed)
    assert next_one.provisioned == []
    assert (outcome.ended, store.get(str(outcome.lease_id)).status) == (True, LeaseStatus.FAILED)


def test_a_request_no_provider_offers_writes_no_lease(store: LeaseStore) -> None:
    cpu_only = memory_provider(gpus=frozenset({GpuClass.NONE}))
    outcome = acquire(context(store, registry_of(cpu_only)), REQUEST._replace(gpu=GpuClass.HIGH))
    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, NoCapacity)
    assert (outcome.lease_id, outcome.ended, outcome.error.details) == (None, False, None)


def test_a_worker_that_may_exist_leaves_the_lease_pending_and_not_ended(store: LeaseStore) -> None:
    class LostCreate(MemoryProvider):
        def provision(self, lease: Lease, env: object, deadline: Deadline | None = None) -> object:  # type: ignore[override]
            raise WorkerOutcomeUnknown("timed out; a container may have been made")

    outcome = acquire(context(store, registry_of(LostCreate())), REQUEST)
    assert isinstance(outcome, NotAcquired) and not outcome.ended
    assert store.get(str(outcome.lease_id)).status == LeaseStatus.PENDING


def test_the_lease_carries_the_id_the_caller_chose(store: LeaseStore) -> None:
    chosen = "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"
    outcome = acquire(context(store, registry_of(memory_provider())), REQUEST, lease_id=chosen)
    assert isinstance(outcome, Acquired) and outcome.lease.lease_id == chosen
