"""Where the Docker fleet meets readiness and owner budgets: regressions found in review after the merges."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.budgets import OwnerBudgets
from scheduler.config import Settings
from scheduler.leases.acquire import acquire as acquire_lease
from scheduler.leases.outcomes import lease_or_raise
from scheduler.leases.readiness import ReadinessPolicy, check_starting_leases
from scheduler.leases.release import release
from scheduler.limits import LeaseLimits
from scheduler.models import WorkerKind
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.local_docker.fleet import DockerFleet, split_token
from scheduler.providers.local_docker.hosts import DockerHostSpec, DownHosts
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.store.host_slots import StoreHostSlots

from .builders import NOW, context, memory_provider

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600, owner_id="o")


def fleet_of(store: LeaseStore, *hosts: tuple[str, int | None], **kw: Any) -> tuple[DockerFleet, dict[str, Any]]:
    members = {name: memory_provider(**kw) for name, _ in hosts}
    specs = [DockerHostSpec(name, f"tcp://127.0.0.1:{2376 + i}", max_leases=cap) for i, (name, cap) in enumerate(hosts)]
    return DockerFleet(
        [(s, members[s.name]) for s in specs], StoreHostSlots(store), DownHosts(), attempt_seconds=2
    ), members


@pytest.mark.moto_only("tx")
def test_a_fleet_hosts_slot_is_given_back_when_budgets_reweigh_the_lease(budget_store: LeaseStore) -> None:
    fleet, _ = fleet_of(budget_store, ("a", 2))
    runpod = memory_provider("runpod", cost_per_hour=2.0)
    providers = ConfiguredProviders(
        Settings(providers=("local-docker", "runpod")),
        factories={"local-docker": lambda _: fleet, "runpod": lambda _: runpod},
    )
    limits = LeaseLimits(budgets=OwnerBudgets(per_hour=100.0))
    lease = lease_or_raise(acquire_lease(context(budget_store, providers, limits=limits, clock=lambda: NOW), REQUEST))
    release(context(budget_store, providers, clock=lambda: NOW), lease.lease_id, "o")
    assert budget_store.counter_values().get("host#local-docker#a", 0) == 0


def test_a_fleet_charges_the_configured_local_docker_rate() -> None:
    from scheduler.providers.local_docker import LocalDockerSettings
    from scheduler.providers.local_docker.factory import fleet_from_settings
    from scheduler.providers.local_docker.hosts import parse_hosts

    hosts = parse_hosts('[{"name":"a","host":"tcp://127.0.0.1:1"}]')
    fleet = fleet_from_settings(LocalDockerSettings(docker_hosts=hosts, local_docker_cost_per_hour=1.5))
    req = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=60)
    assert fleet.price_bound(req) == 1.5


@pytest.mark.moto_only("tx")
def test_one_fleet_host_down_does_not_stop_boot_failures_on_the_others(limited_store: LeaseStore) -> None:
    fleet, members = fleet_of(limited_store, ("a", 5), ("b", 5), boots=True)
    providers = ConfiguredProviders(Settings(providers=("local-docker",)), factories={"local-docker": lambda _: fleet})
    req = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)
    made = [lease_or_raise(acquire_lease(context(limited_store, providers, clock=lambda: NOW), req)) for _ in range(2)]
    hosts = {split_token(str(lease.provider_token))[0]: lease for lease in made}
    members["a"].fail_boot(split_token(str(hosts["a"].provider_token))[1])
    members["b"].unreachable = True
    report = check_starting_leases(context(limited_store, providers, clock=lambda: NOW), ReadinessPolicy())
    assert report.failed, "host a's boot failure should be ended although host b is down"
