"""Selection policy (first available provider in PROVIDERS order) and the provider registry.

`policy.attempt` turns a provider's answer into a decision without a database; acquire's walk over
the providers in order (with the store) is in test_acquire.py.
"""

from __future__ import annotations

import pytest

from scheduler import policy
from scheduler.config import Settings
from scheduler.deadline import Deadline
from scheduler.errors import ConfigurationError
from scheduler.models import GpuClass, WorkerKind
from scheduler.providers.base import Provider, ProviderCapacityError, ProviderUnreachable, WorkerOutcomeUnknown
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.memory import MemoryProvider
from scheduler.providers.registry import known_providers
from scheduler.request_models import LeaseRequest

from .builders import memory_provider, new_lease

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER)


class Raising(MemoryProvider):
    """Provisions by raising `error`."""

    def __init__(self, error: Exception) -> None:
        super().__init__("local-docker")
        self.error = error

    def provision(self, *_: object, **__: object) -> object:  # type: ignore[override]
        raise self.error


def attempt(provider: Provider) -> policy.Attempt:
    return policy.attempt(provider, new_lease(), {"QUALITY": "high"}, Deadline.within(5))


# --- candidates ---------------------------------------------------------------------------------


def test_unavailable_provider_is_not_a_candidate() -> None:
    docker = memory_provider("local-docker", gpus=frozenset({GpuClass.HIGH}))
    runpod = memory_provider("runpod")
    assert policy.candidates_for([docker, runpod], REQUEST) == [runpod]


def test_candidates_keep_policy_order() -> None:
    first, second, third = memory_provider("a"), memory_provider("b"), memory_provider("c")
    assert policy.candidates_for([first, second, third], REQUEST) == [first, second, third]


# --- one attempt: the provider contract's errors as decisions -------------------------------------


def test_a_provider_that_serves_provisions() -> None:
    provider = memory_provider()
    result = attempt(provider)
    assert isinstance(result, policy.Provisioned) and result.provider is provider


def test_the_provider_receives_the_lease_and_its_env() -> None:
    provider, lease = memory_provider(), new_lease()
    policy.attempt(provider, lease, {"QUALITY": "high"}, Deadline.within(5))
    assert provider.provisioned == [(lease.lease_id, {"QUALITY": "high"})]


def test_no_capacity_skips_to_the_next_provider() -> None:
    assert attempt(memory_provider(full=True)) == policy.Skipped("local-docker is full")


def test_an_unreachable_provider_is_skipped_like_one_without_capacity() -> None:
    assert attempt(memory_provider(unreachable=True)) == policy.Skipped("local-docker cannot be reached")


def test_a_worker_whose_outcome_is_unknown_is_skipped_and_may_exist() -> None:
    result = attempt(Raising(WorkerOutcomeUnknown("timed out; a container may have been made")))
    assert result == policy.Skipped("timed out; a container may have been made", worker_may_exist=True)


def test_a_refusal_stops_the_walk() -> None:
    assert attempt(memory_provider(refuse=True)) == policy.Refused("local-docker refused the worker")


@pytest.mark.parametrize("error", [ProviderCapacityError("full"), ProviderUnreachable("down")])
def test_capacity_errors_never_claim_a_worker_may_exist(error: Exception) -> None:
    result = attempt(Raising(error))
    assert isinstance(result, policy.Skipped) and not result.worker_may_exist


# --- registry -----------------------------------------------------------------------------------


class CountingFactory:
    """A provider factory that counts how often it builds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.built: list[Settings] = []

    def __call__(self, settings: Settings) -> Provider:
        self.built.append(settings)
        return memory_provider(self.name)


def test_unknown_provider_name_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ConfiguredProviders(Settings(providers=("local-docker", "nimbus")))


def test_unknown_provider_name_from_the_environment_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ConfiguredProviders(Settings.from_environ({"PROVIDERS": "local-docker,nimbus"}))


def test_empty_provider_list_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ConfiguredProviders(Settings(providers=()))


def test_provider_list_of_only_separators_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError):
        ConfiguredProviders(Settings.from_environ({"PROVIDERS": " , "}))


def test_providers_default_to_local_docker() -> None:
    assert ConfiguredProviders(Settings.from_environ({})).names == ("local-docker",)


def test_registry_keeps_policy_order() -> None:
    assert ConfiguredProviders(Settings.from_environ({"PROVIDERS": "runpod, local-docker"})).names == (
        "runpod",
        "local-docker",
    )


def test_drivers_are_not_built_at_start() -> None:
    factory = CountingFactory("local-docker")
    ConfiguredProviders(Settings(providers=("local-docker",)), factories={"local-docker": factory})
    assert factory.built == []


def test_driver_is_built_on_first_use_with_the_settings() -> None:
    settings = Settings(providers=("local-docker",))
    factory = CountingFactory("local-docker")
    ConfiguredProviders(settings, factories={"local-docker": factory}).get("local-docker")
    assert factory.built == [settings]


def test_driver_is_built_once() -> None:
    factory = CountingFactory("local-docker")
    registry = ConfiguredProviders(Settings(providers=("local-docker",)), factories={"local-docker": factory})
    first, second = registry.get("local-docker"), registry.get("local-docker")
    assert (first is second, len(factory.built)) == (True, 1)


def test_only_the_used_driver_is_built() -> None:
    docker, runpod = CountingFactory("local-docker"), CountingFactory("runpod")
    registry = ConfiguredProviders(
        Settings(providers=("local-docker", "runpod")), factories={"local-docker": docker, "runpod": runpod}
    )
    registry.get("runpod")
    assert (len(docker.built), len(runpod.built)) == (0, 1)


def test_drivers_come_in_policy_order() -> None:
    factories = {name: CountingFactory(name) for name in ("runpod", "local-docker")}
    registry = ConfiguredProviders(Settings(providers=("runpod", "local-docker")), factories=dict(factories))
    assert [provider.name for provider in registry.in_order()] == ["runpod", "local-docker"]


def test_unconfigured_provider_is_refused() -> None:
    registry = ConfiguredProviders(
        Settings(providers=("local-docker",)), factories={"local-docker": CountingFactory("local-docker")}
    )
    with pytest.raises(ConfigurationError):
        registry.get("runpod")


def test_every_known_provider_has_settings_a_build_and_a_read_check_policy() -> None:
    from scheduler.providers.registry import provider_package

    for name in known_providers():
        package = provider_package(name)
        assert callable(package.build) and isinstance(package.CHECKED_ON_READ, bool), name
        assert package.SETTINGS().__class__ is package.SETTINGS, name


def test_only_the_providers_that_may_be_asked_cheaply_are_checked_on_read() -> None:
    registry = ConfiguredProviders(Settings(providers=("local-docker", "runpod")))
    assert registry.checked_on_read() == frozenset({"local-docker"})
