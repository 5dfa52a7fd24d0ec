"""A fleet of Docker hosts (DOCKER_HOSTS): placement by free slots, atomic per-host caps, a host that does not
answer passed over and remembered, and every later call routed to the lease's own host.

Each host is the in-memory driver; the caps are the store's counters (TransactWriteItems: moto only).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler.config import Settings
from scheduler.errors import ConfigurationError, NoCapacity
from scheduler.leases.acquire import acquire as acquire_lease
from scheduler.leases.outcomes import lease_or_raise
from scheduler.leases.reconcile import COUNTER_SETTLE_SECONDS, reconcile
from scheduler.leases.release import release
from scheduler.lifecycle import LeaseStatus
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import PlaceCounter
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.local_docker import LocalDockerSettings
from scheduler.providers.local_docker.fleet import DockerFleet, split_token
from scheduler.providers.local_docker.hosts import DockerHostSpec, DownHosts, parse_hosts
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.store.host_slots import StoreHostSlots

from .builders import NOW, context, memory_provider
from .stored import drift_counter

NEEDS_TRANSACTIONS = pytest.mark.moto_only("host slots use TransactWriteItems, which dynalite lacks")
REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)


def fleet_of(
    store: LeaseStore, *hosts: tuple[str, int | None], **spec: Any
) -> tuple[DockerFleet, dict[str, MemoryProvider]]:
    members = {name: memory_provider() for name, _ in hosts}
    specs = [
        DockerHostSpec(name, f"tcp://127.0.0.1:{2376 + i}", max_leases=cap, **spec)
        for i, (name, cap) in enumerate(hosts)
    ]
    fleet = DockerFleet([(s, members[s.name]) for s in specs], StoreHostSlots(store), DownHosts(), attempt_seconds=2)
    return fleet, members


def registry(fleet: DockerFleet) -> ConfiguredProviders:
    return ConfiguredProviders(Settings(providers=("local-docker",)), factories={"local-docker": lambda _: fleet})


def acquire(store: LeaseStore, fleet: DockerFleet, **request: Any) -> Lease:
    return lease_or_raise(acquire_lease(context(store, registry(fleet)), REQUEST._replace(**request)))


def host_of(lease: Lease) -> str | None:
    return split_token(str(lease.provider_token))[0]


@NEEDS_TRANSACTIONS
def test_two_hosts_of_two_slots_take_two_leases_each_and_refuse_a_fifth(limited_store: LeaseStore) -> None:
    fleet, members = fleet_of(limited_store, ("a", 2), ("b", 2))

    placed = [host_of(acquire(limited_store, fleet)) for _ in range(4)]
    with pytest.raises(NoCapacity) as refused:
        acquire(limited_store, fleet)

    assert "a: at its cap of 2" in refused.value.details["providers"]["local-docker"]
    assert sorted(placed) == ["a", "a", "b", "b"]
    assert placed[:2] in (["a", "b"], ["b", "a"])  # spread: the emptier host first
    assert (len(members["a"].workers), len(members["b"].workers)) == (2, 2)
    assert limited_store.counter_values() == {"host#local-docker#a": 2, "host#local-docker#b": 2}


@NEEDS_TRANSACTIONS
def test_the_host_with_the_most_free_slots_is_chosen(limited_store: LeaseStore) -> None:
    fleet, _ = fleet_of(limited_store, ("small", 1), ("big", 5))

    assert host_of(acquire(limited_store, fleet)) == "big"


@NEEDS_TRANSACTIONS
def test_release_goes_to_the_leases_host_and_gives_its_slot_back(limited_store: LeaseStore) -> None:
    fleet, members = fleet_of(limited_store, ("a", 1), ("b", 1))
    first = acquire(limited_store, fleet)
    host = str(host_of(first))

    release(context(limited_store, registry(fleet)), first.lease_id, first.owner_id)

    assert members[host].release_calls == [first.lease_id]
    assert members["b" if host == "a" else "a"].release_calls == []
    assert limited_store.counter_values()[f"host#local-docker#{host}"] == 0


@NEEDS_TRANSACTIONS
def test_an_unreachable_host_is_skipped_remembered_down_and_not_asked_again(limited_store: LeaseStore) -> None:
    fleet, members = fleet_of(limited_store, ("a", 5), ("b", 2))
    members["a"].unreachable = True

    first = acquire(limited_store, fleet)
    second = acquire(limited_store, fleet)

    assert (host_of(first), host_of(second)) == ("b", "b")
    assert len(members["a"].provisioned) == 1  # tried once, then remembered as down
    assert fleet.down.is_down("a")
    assert limited_store.counter_values().get("host#local-docker#a", 0) == 0  # its slot was given back


@NEEDS_TRANSACTIONS
def test_hosts_that_cannot_serve_the_gpu_or_region_are_not_chosen(limited_store: LeaseStore) -> None:
    members = {name: memory_provider() for name in ("cpu", "gpu-eu", "gpu-us")}
    specs = [
        DockerHostSpec("cpu", "tcp://127.0.0.1:1", max_leases=9),
        DockerHostSpec("gpu-eu", "tcp://127.0.0.1:2", max_leases=1, gpus=("none", "entry"), region="eu"),
        DockerHostSpec("gpu-us", "tcp://127.0.0.1:3", max_leases=1, gpus=("none", "entry"), region="us"),
    ]
    fleet = DockerFleet([(spec, members[spec.name]) for spec in specs], StoreHostSlots(limited_store))

    assert host_of(acquire(limited_store, fleet, gpu=GpuClass.ENTRY, region="us")) == "gpu-us"
    assert host_of(acquire(limited_store, fleet, gpu=GpuClass.ENTRY)) == "gpu-eu"
    assert not fleet.available(REQUEST._replace(gpu=GpuClass.MID))


@NEEDS_TRANSACTIONS
def test_a_host_that_cannot_be_listed_has_none_of_its_leases_judged_ghosts(limited_store: LeaseStore) -> None:
    fleet, members = fleet_of(limited_store, ("a", 5), ("b", 5))
    leases = [acquire(limited_store, fleet) for _ in range(2)]
    on_a = next(lease for lease in leases if host_of(lease) == "a")
    members["a"].unreachable = True
    later = NOW.now(NOW.tzinfo) + timedelta(hours=1)

    report = reconcile(
        context(limited_store, registry(fleet), clock=lambda: later, orphan_grace_seconds=0, pending_deadline_seconds=1)
    )

    assert report.ghosts_failed == []
    assert limited_store.get(on_a.lease_id).status == LeaseStatus.ACTIVE
    assert not fleet.vouches_for(on_a.provider_token) and fleet.unlisted == {"a"}


@NEEDS_TRANSACTIONS
def test_a_vanished_worker_on_a_listed_host_is_still_a_ghost(limited_store: LeaseStore) -> None:
    fleet, members = fleet_of(limited_store, ("a", 5))
    lease = acquire(limited_store, fleet)
    members["a"].workers.clear()
    later = NOW.now(NOW.tzinfo) + timedelta(hours=1)

    report = reconcile(
        context(limited_store, registry(fleet), clock=lambda: later, orphan_grace_seconds=0, pending_deadline_seconds=1)
    )

    assert report.ghosts_failed == [lease.lease_id]


def test_a_fleet_declares_each_hosts_counter_with_its_cap(limited_store: LeaseStore) -> None:
    fleet, _ = fleet_of(limited_store, ("a", 2), ("b", None))

    assert fleet.place_counters() == (
        PlaceCounter("a", "host#local-docker#a", 2),
        PlaceCounter("b", "host#local-docker#b", None),
    )
    assert registry(fleet).place_counters() == list(fleet.place_counters())


def test_a_single_docker_host_keeps_no_counter_of_its_own() -> None:
    assert memory_provider().place_counters() == ()


def reconcile_twice(store: LeaseStore, fleet: DockerFleet) -> dict[str, tuple[int, int]]:
    """What the second of two reconciler runs a settling period apart repaired (no cap, quota or budget set)."""
    first = NOW.now(NOW.tzinfo) + timedelta(hours=1)
    second = first + timedelta(seconds=COUNTER_SETTLE_SECONDS)
    for at in (first, second):
        report = reconcile(context(store, registry(fleet), clock=lambda at=at: at, orphan_grace_seconds=600))
    return report.counters_repaired


def drift(store: LeaseStore, counter: str, value: int) -> None:
    drift_counter(store, counter, value)


@NEEDS_TRANSACTIONS
def test_the_reconciler_repairs_a_drifted_host_counter_when_a_host_has_a_cap(limited_store: LeaseStore) -> None:
    fleet, _ = fleet_of(limited_store, ("a", 5))
    acquire(limited_store, fleet)
    drift(limited_store, "host#local-docker#a", 4)

    assert reconcile_twice(limited_store, fleet) == {"host#local-docker#a": (4, 1)}
    assert limited_store.counter_values()["host#local-docker#a"] == 1


@NEEDS_TRANSACTIONS
def test_the_reconciler_leaves_the_counters_alone_when_no_host_has_a_cap(limited_store: LeaseStore) -> None:
    fleet, _ = fleet_of(limited_store, ("a", None))
    acquire(limited_store, fleet)
    drift(limited_store, "host#local-docker#a", 4)

    assert reconcile_twice(limited_store, fleet) == {}


# --- DOCKER_HOSTS --------------------------------------------------------------------------------


def test_docker_hosts_is_parsed_with_its_defaults() -> None:
    (host,) = parse_hosts('[{"name": "gpu-a", "host": "tcp://10.0.0.5:2376", "max_leases": 8}]')

    assert host == DockerHostSpec("gpu-a", "tcp://10.0.0.5:2376", None, 8, ("none",), None)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not json", "JSON list"),
        ("[]", "non-empty"),
        ('[{"name": "a"}]', "host must be"),
        ('[{"name": "A B", "host": "tcp://h:1"}]', "name must be"),
        ('[{"name": "gpu-a\\n", "host": "tcp://h:1"}]', "name must be"),  # `$` would let the newline through
        ('[{"name": "gpu-\\u0661", "host": "tcp://h:1"}]', "name must be"),
        ('[{"name": "a", "host": "tcp://h:1", "max_leases": -1}]', "max_leases"),
        ('[{"name": "a", "host": "tcp://h:1", "gpus": ["huge"]}]', "gpus"),
        ('[{"name": "a", "host": "tcp://h:1", "colour": "red"}]', "unknown keys"),
        ('[{"name": "a", "host": "tcp://h:1"}, {"name": "a", "host": "tcp://h:2"}]', "unique"),
    ],
)
def test_a_bad_docker_hosts_names_the_variable_and_the_problem(raw: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=f"DOCKER_HOSTS=.*{problem}"):
        LocalDockerSettings.from_environ({"DOCKER_HOSTS": raw})


def test_the_single_docker_host_joins_a_fleet_as_default() -> None:
    settings = LocalDockerSettings.from_environ(
        {"DOCKER_HOST": "tcp://old:2376", "DOCKER_HOSTS": '[{"name": "a", "host": "tcp://h:1"}]'}
    )

    assert [spec.name for spec in settings.fleet()] == ["a", "default"]


def test_without_docker_hosts_there_is_no_fleet() -> None:
    assert LocalDockerSettings.from_environ({"DOCKER_HOST": "tcp://old:2376"}).fleet() == ()
