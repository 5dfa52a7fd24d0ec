"""Where a fleet lease's worker may be when its token does not name a configured host, and who may call it gone.

- A lease made before the fleet records a bare container id: its worker ran on the old single DOCKER_HOST,
  which joins a fleet as host `default`. Found on any host, it is released there; found nowhere, only host
  `default` (configured and listed) or the operator (DOCKER_RETIRED_HOSTS) may call it gone.
- A lease that never recorded a token (its acquire died mid-way) but holds a host's slot is that host's to
  confirm gone: on a host no longer configured it stays `releasing`, as a lease with that host's token does.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler.errors import ProviderFailed
from scheduler.leases.logs import worker_logs
from scheduler.leases.reconcile import reconcile
from scheduler.leases.release import release
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.providers.base import ProvisionedWorker, WorkerHostNotConfigured
from scheduler.providers.local_docker.fleet import DockerFleet
from scheduler.providers.local_docker.hosts import DockerHostSpec
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore
from scheduler.store.counters import Limit
from scheduler.worker_logs import LogQuery

from .builders import NOW, context, memory_provider, new_lease, registry_of

SPEC_A = DockerHostSpec("a", "tcp://127.0.0.1:2376", max_leases=4)
SPEC_B = DockerHostSpec("b", "tcp://127.0.0.1:2377", max_leases=4)
DEFAULT = DockerHostSpec("default", "tcp://127.0.0.1:2378", gpus=("none", "entry"))
CONTAINER = "c0ffee"
NEEDS_TRANSACTIONS = pytest.mark.moto_only("a host slot is taken with TransactWriteItems, which dynalite lacks")


def hour_later() -> datetime:
    return NOW + timedelta(hours=1)


def reconcile_once(store: LeaseStore, fleet: DockerFleet) -> None:
    reconcile(context(store, registry_of(fleet), clock=hour_later, orphan_grace_seconds=0, pending_deadline_seconds=60))


def pre_fleet_lease(store: LeaseStore, old_host: MemoryProvider) -> Lease:
    """An active lease the single DOCKER_HOST driver made: its token is the bare container id."""
    lease = new_lease(provider="local-docker", owner_id="o", ttl_seconds=86400)
    store.create_pending(lease)
    old_host.add_worker(lease.lease_id, CONTAINER, created_at=NOW)
    return store.activate(lease.lease_id, "local-docker", ProvisionedWorker(CONTAINER, None, cost_per_hour=1.0), NOW)


# --- a lease made before the fleet --------------------------------------------------------------------------------


def test_a_pre_fleet_lease_is_not_called_a_ghost_when_its_old_host_is_not_in_the_fleet(store: LeaseStore) -> None:
    old_host = memory_provider()
    lease = pre_fleet_lease(store, old_host)

    reconcile_once(store, DockerFleet([(SPEC_A, memory_provider())]))

    assert store.get(lease.lease_id).status is LeaseStatus.ACTIVE
    assert CONTAINER in old_host.workers


def test_a_running_pre_fleet_lease_on_host_default_is_neither_an_orphan_nor_a_ghost(store: LeaseStore) -> None:
    default = memory_provider()
    lease = pre_fleet_lease(store, default)

    reconcile_once(store, DockerFleet([(SPEC_A, memory_provider()), (DEFAULT, default)]))

    assert store.get(lease.lease_id).status is LeaseStatus.ACTIVE
    assert default.release_calls == [] and CONTAINER in default.workers


def test_a_pre_fleet_lease_whose_worker_stopped_on_host_default_is_ended_saying_why(store: LeaseStore) -> None:
    default = memory_provider()
    lease = pre_fleet_lease(store, default)
    default.stop(CONTAINER, "the worker container exited with code 1")

    reconcile_once(store, DockerFleet([(DEFAULT, default)]))

    stored = store.get(lease.lease_id)
    assert stored.status is LeaseStatus.FAILED and stored.failure_reason == "the worker container exited with code 1"


def test_releasing_a_pre_fleet_lease_no_host_holds_waits_for_its_old_host(store: LeaseStore) -> None:
    old_host, a = memory_provider(), memory_provider()
    lease = pre_fleet_lease(store, old_host)

    with pytest.raises(ProviderFailed) as refused:
        release(context(store, registry_of(DockerFleet([(SPEC_A, a)])), clock=hour_later), lease.lease_id, "o")

    assert "made on the single DOCKER_HOST before DOCKER_HOSTS" in refused.value.message
    assert store.get(lease.lease_id).status is LeaseStatus.RELEASING
    assert CONTAINER in old_host.workers and a.release_calls == []


def test_a_pre_fleet_worker_no_host_holds_is_gone_on_host_defaults_word() -> None:
    a, default = memory_provider(), memory_provider()
    fleet = DockerFleet([(SPEC_A, a), (DEFAULT, default)])
    fleet.list_managed()

    assert fleet.release("lease-1", CONTAINER) is None
    assert default.release_calls == ["lease-1"]
    assert fleet.vouches_for(CONTAINER)


def test_a_pre_fleet_worker_no_host_holds_is_gone_once_host_default_is_retired() -> None:
    fleet = DockerFleet([(SPEC_A, memory_provider())], retired=("default",))
    fleet.list_managed()

    assert "Docker host default was retired by the operator" in str(fleet.release("lease-1", CONTAINER))
    assert fleet.vouches_for(CONTAINER)


def test_no_pre_fleet_worker_is_judged_while_a_host_could_not_be_listed() -> None:
    default = memory_provider(unreachable=True)
    fleet = DockerFleet([(SPEC_A, memory_provider()), (DEFAULT, default)])
    fleet.list_managed()

    assert not fleet.vouches_for(CONTAINER)


def test_the_logs_of_a_pre_fleet_lease_no_host_holds_wait_for_its_old_host(store: LeaseStore) -> None:
    lease = pre_fleet_lease(store, memory_provider())

    with pytest.raises(ProviderFailed, match="made on the single DOCKER_HOST"):  # 502, not 410: it may run
        worker_logs(
            context(store, registry_of(DockerFleet([(SPEC_A, memory_provider())]))), lease.lease_id, "o", LogQuery()
        )


# --- a lease that never recorded its token ------------------------------------------------------------------------


def placed_on(store: LeaseStore, spec: DockerHostSpec, host: MemoryProvider) -> Lease:
    """A pending lease holding `spec`'s slot, its container made there, its acquire dead before recording it."""
    lease = new_lease(provider="local-docker", owner_id="o")
    assert store.create_pending(lease, [Limit(spec.counter("local-docker"), spec.max_leases)]) is None
    host.add_worker(lease.lease_id, created_at=NOW)
    return lease


@NEEDS_TRANSACTIONS
def test_a_pending_lease_placed_on_a_removed_host_stays_releasing(limited_store: LeaseStore) -> None:
    store = limited_store
    a, b = memory_provider(), memory_provider()
    lease = placed_on(store, SPEC_B, b)

    reconcile_once(store, DockerFleet([(SPEC_A, a)]))

    assert store.get(lease.lease_id).status is LeaseStatus.RELEASING
    assert b.workers and a.release_calls == []


@NEEDS_TRANSACTIONS
def test_a_pending_lease_placed_on_a_configured_host_is_removed_there_and_failed(limited_store: LeaseStore) -> None:
    store = limited_store
    a, b = memory_provider(), memory_provider()
    lease = placed_on(store, SPEC_B, b)

    reconcile_once(store, DockerFleet([(SPEC_A, a), (SPEC_B, b)]))

    assert store.get(lease.lease_id).status is LeaseStatus.FAILED
    assert b.workers == {} and store.counter_values().get(SPEC_B.counter("local-docker"), 0) == 0


@NEEDS_TRANSACTIONS
def test_a_pending_lease_placed_on_a_retired_host_ends_saying_so(limited_store: LeaseStore) -> None:
    store = limited_store
    lease = placed_on(store, SPEC_B, memory_provider())

    reconcile_once(store, DockerFleet([(SPEC_A, memory_provider())], retired=("b",)))

    stored = store.get(lease.lease_id)
    assert stored.status is LeaseStatus.FAILED
    assert "Docker host b was retired by the operator" in str(stored.failure_reason)


def test_a_fleet_names_the_host_whose_slot_a_token_less_lease_holds() -> None:
    fleet = DockerFleet([(SPEC_A, memory_provider())])

    assert fleet.placement_token(("owner#o", SPEC_B.counter("local-docker"))) == "b/"
    assert fleet.placement_token(("owner#o", "provider#local-docker")) is None
    with pytest.raises(WorkerHostNotConfigured):
        fleet.release("lease-1", "b/")
