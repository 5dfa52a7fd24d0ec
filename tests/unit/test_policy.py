"""Selection policy (first available provider in PROVIDERS order) and the provider registry."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from scheduler.config import Settings
from scheduler.deadline import Deadline
from scheduler.errors import ConfigurationError, NoCapacity
from scheduler.models import Lease, LeaseRequest, WorkerKind
from scheduler.policy import candidates_for, provision_first_available
from scheduler.providers.base import (
    ManagedWorker,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
)
from scheduler.providers.registry import ProviderRegistry

from .builders import new_lease

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER)


class FakeProvider(Provider):
    """A provider that serves, or refuses with a given error, and records what it was asked."""

    def __init__(self, name: str, *, available: bool = True, error: Exception | None = None) -> None:
        self.name = name
        self._available = available
        self._error = error
        self.provisioned: list[tuple[str, dict[str, str]]] = []

    def available(self, request: LeaseRequest) -> bool:
        return self._available

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        self.provisioned.append((lease.lease_id, dict(env)))
        if self._error is not None:
            raise self._error
        return ProvisionedWorker(token=f"{self.name}-worker", endpoint=f"http://127.0.0.1/{self.name}")

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        return None

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        return []


def provision(*providers: Provider) -> tuple[Provider, ProvisionedWorker]:
    return provision_first_available(candidates_for(providers, REQUEST), new_lease(), {})


# --- candidates ---------------------------------------------------------------------------------


def test_unavailable_provider_is_not_a_candidate() -> None:
    docker, runpod = FakeProvider("local-docker", available=False), FakeProvider("runpod")
    assert candidates_for([docker, runpod], REQUEST) == [runpod]


def test_candidates_keep_policy_order() -> None:
    first, second, third = FakeProvider("a"), FakeProvider("b"), FakeProvider("c")
    assert candidates_for([first, second, third], REQUEST) == [first, second, third]


# --- provisioning -------------------------------------------------------------------------------


def test_first_available_provider_serves() -> None:
    first, second = FakeProvider("local-docker"), FakeProvider("runpod")
    provider, worker = provision(first, second)
    assert (provider, worker.token) == (first, "local-docker-worker")


def test_providers_after_the_serving_one_are_not_asked() -> None:
    first, second = FakeProvider("local-docker"), FakeProvider("runpod")
    provision(first, second)
    assert second.provisioned == []


def test_unavailable_provider_is_skipped() -> None:
    skipped, serving = FakeProvider("local-docker", available=False), FakeProvider("runpod")
    provider, _ = provision(skipped, serving)
    assert (provider, skipped.provisioned) == (serving, [])


def test_capacity_error_falls_over_to_the_next_provider() -> None:
    full = FakeProvider("local-docker", error=ProviderCapacityError("at LOCAL_DOCKER_MAX_LEASES"))
    provider, _ = provision(full, FakeProvider("runpod"))
    assert provider.name == "runpod"


def test_unreachable_provider_falls_over_to_the_next_provider() -> None:
    down = FakeProvider("local-docker", error=ProviderUnreachable("connection refused"))
    provider, _ = provision(down, FakeProvider("runpod"))
    assert provider.name == "runpod"


def test_every_provider_without_capacity_is_no_capacity() -> None:
    with pytest.raises(NoCapacity):
        provision(
            FakeProvider("local-docker", error=ProviderCapacityError("full")),
            FakeProvider("runpod", error=ProviderUnreachable("down")),
        )


def test_no_capacity_names_each_refusal() -> None:
    with pytest.raises(NoCapacity) as raised:
        provision(
            FakeProvider("local-docker", error=ProviderCapacityError("full")),
            FakeProvider("runpod", error=ProviderUnreachable("down")),
        )
    assert raised.value.details == {"providers": {"local-docker": "full", "runpod": "down"}}


def test_no_candidate_at_all_is_no_capacity() -> None:
    with pytest.raises(NoCapacity):
        provision(FakeProvider("local-docker", available=False))


def test_request_failure_is_not_fallen_over() -> None:
    failing = FakeProvider("local-docker", error=ProviderRequestFailed("image not found"))
    with pytest.raises(ProviderRequestFailed):
        provision(failing, FakeProvider("runpod"))


def test_request_failure_does_not_reach_the_next_provider() -> None:
    failing, next_one = FakeProvider("local-docker", error=ProviderRequestFailed("bad")), FakeProvider("runpod")
    with pytest.raises(ProviderRequestFailed):
        provision(failing, next_one)
    assert next_one.provisioned == []


def test_provider_receives_the_lease_and_its_env() -> None:
    provider, lease = FakeProvider("local-docker"), new_lease()
    provision_first_available([provider], lease, {"QUALITY": "high"})
    assert provider.provisioned == [(lease.lease_id, {"QUALITY": "high"})]


# --- registry -----------------------------------------------------------------------------------


class CountingFactory:
    """A provider factory that counts how often it builds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.built: list[Settings] = []

    def __call__(self, settings: Settings) -> Provider:
        self.built.append(settings)
        return FakeProvider(self.name)


def test_unknown_provider_name_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ProviderRegistry(Settings(providers=("local-docker", "nimbus")))


def test_unknown_provider_name_from_the_environment_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ProviderRegistry(Settings.from_environ({"PROVIDERS": "local-docker,nimbus"}))


def test_empty_provider_list_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ProviderRegistry(Settings(providers=()))


def test_provider_list_of_only_separators_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ProviderRegistry(Settings.from_environ({"PROVIDERS": " , "}))


def test_providers_default_to_local_docker() -> None:
    assert ProviderRegistry(Settings.from_environ({})).names == ("local-docker",)


def test_registry_keeps_policy_order() -> None:
    assert ProviderRegistry(Settings.from_environ({"PROVIDERS": "runpod, local-docker"})).names == (
        "runpod",
        "local-docker",
    )


def test_drivers_are_not_built_at_start() -> None:
    factory = CountingFactory("local-docker")
    ProviderRegistry(Settings(providers=("local-docker",)), factories={"local-docker": factory})
    assert factory.built == []


def test_driver_is_built_on_first_use_with_the_settings() -> None:
    settings = Settings(providers=("local-docker",))
    factory = CountingFactory("local-docker")
    ProviderRegistry(settings, factories={"local-docker": factory}).get("local-docker")
    assert factory.built == [settings]


def test_driver_is_built_once() -> None:
    factory = CountingFactory("local-docker")
    registry = ProviderRegistry(Settings(providers=("local-docker",)), factories={"local-docker": factory})
    first, second = registry.get("local-docker"), registry.get("local-docker")
    assert (first is second, len(factory.built)) == (True, 1)


def test_only_the_used_driver_is_built() -> None:
    docker, runpod = CountingFactory("local-docker"), CountingFactory("runpod")
    registry = ProviderRegistry(
        Settings(providers=("local-docker", "runpod")), factories={"local-docker": docker, "runpod": runpod}
    )
    registry.get("runpod")
    assert (len(docker.built), len(runpod.built)) == (0, 1)


def test_drivers_come_in_policy_order() -> None:
    factories = {name: CountingFactory(name) for name in ("runpod", "local-docker")}
    registry = ProviderRegistry(Settings(providers=("runpod", "local-docker")), factories=dict(factories))
    assert [provider.name for provider in registry.in_order()] == ["runpod", "local-docker"]


def test_unconfigured_provider_is_refused() -> None:
    registry = ProviderRegistry(
        Settings(providers=("local-docker",)), factories={"local-docker": CountingFactory("local-docker")}
    )
    with pytest.raises(ConfigurationError):
        registry.get("runpod")
