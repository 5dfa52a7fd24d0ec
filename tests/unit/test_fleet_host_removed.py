"""A Docker host taken out of DOCKER_HOSTS: its workers are never reported gone on another host's word.

Fleet a+b with leases on b, then the fleet restarted with only a (the same in-memory host a, b's workers
still running on b). A release must be confirmed by the host holding the worker: until b is configured
again its leases stay `releasing` and nobody judges them; an operator who names b in DOCKER_RETIRED_HOSTS
vouches that its workers are gone. No host slots here (the caps are not what this is about), so every
test runs on both moto and dynalite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from docker.errors import NotFound

from scheduler.config import Settings
from scheduler.errors import ConfigurationError, ProviderFailed
from scheduler.leases.acquire import acquire as acquire_lease
from scheduler.leases.liveness import ReadCheck
from scheduler.leases.logs import worker_logs
from scheduler.leases.outcomes import lease_or_raise
from scheduler.leases.reconcile import reconcile
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, WorkerKind
from scheduler.observability.instrumented import InstrumentedProvider
from scheduler.providers.base import (
    Provider,
    ProviderRequestFailed,
    ProviderUnreachable,
    Readiness,
    ReadinessState,
    WorkerGone,
    WorkerHostNotConfigured,
)
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.local_docker import LocalDockerSettings, build
from scheduler.providers.local_docker.fleet import DockerFleet, split_token
from scheduler.providers.local_docker.hosts import DockerHostSpec
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.worker_logs import LogLine, LogQuery
from tests.support.metrics import RecordedMetrics

from .builders import context, memory_provider

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600, owner_id="o")
SPEC_A = DockerHostSpec("a", "tcp://127.0.0.1:2376")
SPEC_B = DockerHostSpec("b", "tcp://127.0.0.1:2377")


def registry(fleet: Provider) -> ConfiguredProviders:
    return ConfiguredProviders(Settings(providers=("local-docker",)), factories={"local-docker": lambda _: fleet})


def leases_on_b(store: LeaseStore, count: int = 1) -> tuple[list[Lease], MemoryProvider, MemoryProvider]:
    """`count` active leases whose workers run on host b (a is full while they are made)."""
    a, b = memory_provider(full=True), memory_provider()
    both = DockerFleet([(SPEC_A, a), (SPEC_B, b)])
    made = [lease_or_raise(acquire_lease(context(store, registry(both)), REQUEST)) for _ in range(count)]
    assert {split_token(str(lease.provider_token))[0] for lease in made} == {"b"}
    a.full = False
    return made, a, b


def only_a(a: MemoryProvider, **retired: tuple[str, ...]) -> DockerFleet:
    """The fleet after a restart with DOCKER_HOSTS naming a alone."""
    return DockerFleet([(SPEC_A, a)], **retired)


def later(hours: float = 1) -> datetime:
    return datetime.now().astimezone() + timedelta(hours=hours)


def test_a_release_on_a_host_no_longer_configured_fails_and_the_lease_stays_releasing(store: LeaseStore) -> None:
    (lease,), a, b = leases_on_b(store)

    with pytest.raises(ProviderFailed) as refused:
        release(context(store, registry(only_a(a))), lease.lease_id, "o")

    assert "Docker host b is not configured" in refused.value.message
    assert store.get(lease.lease_id).status is LeaseStatus.RELEASING
    assert a.release_calls == []  # never looked for on another host, where its absence proves nothing
    assert split_token(str(lease.provider_token))[1] in b.workers


def test_the_sweep_retries_a_lease_on_a_removed_host_and_releases_it_once_the_host_is_back(store: LeaseStore) -> None:
    (lease,), a, b = leases_on_b(store)
    expired = later()

    first = sweep(context(store, registry(only_a(a)), clock=lambda: expired))
    assert first.failed_releases == [lease.lease_id] and first.ended == []
    assert store.get(lease.lease_id).status is LeaseStatus.RELEASING

    back = DockerFleet([(SPEC_A, a), (SPEC_B, b)])
    second = sweep(context(store, registry(back), clock=lambda: later(2)))  # past the first claim's due time

    assert [ended.lease_id for ended in second.ended] == [lease.lease_id]
    assert store.get(lease.lease_id).status is LeaseStatus.EXPIRED
    assert b.workers == {}


def test_the_reconciler_judges_no_lease_on_a_host_no_longer_configured(store: LeaseStore) -> None:
    (lease,), a, _ = leases_on_b(store)
    fleet = only_a(a)

    report = reconcile(context(store, registry(fleet), clock=later, orphan_grace_seconds=0, pending_deadline_seconds=1))

    assert report.ghosts_failed == [] and report.ended == []
    assert store.get(lease.lease_id).status is LeaseStatus.ACTIVE
    assert not fleet.vouches_for(lease.provider_token)


def test_a_read_of_a_lease_on_a_host_no_longer_configured_leaves_it_as_it_is(store: LeaseStore) -> None:
    (lease,), a, _ = leases_on_b(store)
    fleet = only_a(a)

    read = ReadCheck(checked=frozenset({"local-docker"}))(context(store, registry(fleet)), lease)

    assert read.lease.status is LeaseStatus.ACTIVE and not read.ended_now
    assert fleet.stopped_reason(lease.lease_id, str(lease.provider_token)) is None


def test_whether_a_worker_on_a_host_no_longer_configured_is_ready_is_unknown_not_failed(store: LeaseStore) -> None:
    (lease,), a, _ = leases_on_b(store)
    fleet = only_a(a)

    with pytest.raises(WorkerHostNotConfigured):
        fleet.readiness(lease.lease_id, str(lease.provider_token))
    assert fleet.readiness_of({str(lease.provider_token): lease.lease_id}) == {}


def test_the_logs_of_a_lease_on_a_host_no_longer_configured_are_a_provider_error_naming_the_host(
    store: LeaseStore,
) -> None:
    (lease,), a, _ = leases_on_b(store)

    with pytest.raises(ProviderFailed) as refused:
        worker_logs(context(store, registry(only_a(a))), lease.lease_id, "o", LogQuery())

    assert "Docker host b is not configured" in refused.value.message  # ProviderFailed: 502 provider_error


def test_a_bare_token_from_before_the_fleet_is_found_and_released_on_whichever_host_holds_it() -> None:
    a, b = memory_provider(), memory_provider()
    token = b.add_worker("lease-1", "c0ffee")
    b.output[token] = [LogLine(1, "hello")]
    fleet = DockerFleet([(SPEC_A, a), (SPEC_B, b)])

    assert [line.text for line in fleet.logs("lease-1", "c0ffee", LogQuery())] == ["hello"]
    assert fleet.release("lease-1", "c0ffee") is None
    assert a.release_calls == [] and b.release_calls == ["lease-1"] and b.workers == {}


def test_a_release_waiting_on_an_unconfigured_host_is_counted_by_host() -> None:
    metrics = RecordedMetrics()
    with pytest.raises(WorkerHostNotConfigured):
        InstrumentedProvider(only_a(memory_provider()), metrics).release("lease-1", "b/c0ffee")
    assert metrics.of("UnconfiguredHostRelease") == [{"provider": "local-docker", "host": "b", "value": 1}]


# --- an operator retires the host -------------------------------------------------------------------


def test_a_lease_on_a_retired_host_is_released_saying_the_operator_retired_it(store: LeaseStore) -> None:
    (lease,), a, b = leases_on_b(store)

    ended = release(context(store, registry(only_a(a, retired=("b",)))), lease.lease_id, "o")

    stored = store.get(lease.lease_id)
    assert ended.status is stored.status is LeaseStatus.RELEASED
    assert stored.failure_reason is not None and "Docker host b was retired by the operator" in stored.failure_reason
    assert a.release_calls == [] and b.release_calls == []  # nobody asked: the operator vouched


def test_a_read_of_an_active_lease_on_a_retired_host_ends_it_failed_with_that_reason(store: LeaseStore) -> None:
    (lease,), a, _ = leases_on_b(store)

    read = ReadCheck(checked=frozenset({"local-docker"}))(context(store, registry(only_a(a, retired=("b",)))), lease)

    assert read.ended_now and read.lease.status is LeaseStatus.FAILED
    reason = str(store.get(lease.lease_id).failure_reason)
    assert reason.count("retired by the operator") == 1, reason


def test_the_reconciler_ends_active_leases_on_a_retired_host_saying_so(store: LeaseStore) -> None:
    (lease,), a, b = leases_on_b(store)

    report = reconcile(
        context(
            store, registry(only_a(a, retired=("b",))), clock=later, orphan_grace_seconds=0, pending_deadline_seconds=1
        )
    )

    stored = store.get(lease.lease_id)
    assert report.ghosts_failed == [lease.lease_id] and stored.status is LeaseStatus.FAILED
    assert "Docker host b was retired by the operator" in str(stored.failure_reason)
    assert b.release_calls == []  # nobody asked: the operator vouched


def test_a_worker_on_a_retired_host_is_gone_for_logs_and_readiness() -> None:
    fleet = only_a(memory_provider(), retired=("b",))

    with pytest.raises(WorkerGone):
        fleet.logs("lease-1", "b/c0ffee", LogQuery())
    assert fleet.readiness("lease-1", "b/c0ffee").state is ReadinessState.FAILED
    assert fleet.readiness_of({"b/c0ffee": "lease-1"})["b/c0ffee"].state is ReadinessState.FAILED


def test_a_host_both_configured_and_retired_is_served_never_vouched_gone() -> None:
    a = memory_provider()
    token = a.add_worker("lease-1")
    fleet = DockerFleet([(SPEC_A, a)], retired=("a",))

    assert fleet.release("lease-1", f"a/{token}") is None
    assert a.release_calls == ["lease-1"]


def test_retired_hosts_are_a_comma_list_of_host_names() -> None:
    settings = LocalDockerSettings.from_environ({"DOCKER_RETIRED_HOSTS": " gpu-b, old-1 ,"})
    assert settings.docker_retired_hosts == ("gpu-b", "old-1")
    with pytest.raises(ConfigurationError, match="DOCKER_RETIRED_HOSTS"):
        LocalDockerSettings.from_environ({"DOCKER_RETIRED_HOSTS": "gpu-b,Not A Host"})


# --- DOCKER_HOSTS unset again: the single DOCKER_HOST driver meets tokens recorded by the fleet ----------------------


def _single_host(asked: list[str], retired: tuple[str, ...] = ()) -> Provider:
    from scheduler.providers.local_docker.driver import LocalDockerProvider

    def connect() -> Any:
        asked.append("connect")
        raise ProviderUnreachable("no engine in a unit test")

    images = {WorkerKind.RENDERER: "r", WorkerKind.ANIM: "a"}
    return LocalDockerProvider(connect=connect, images=images, network="none", worker_port=8080, retired=retired)


def test_a_single_host_never_calls_a_fleet_hosts_worker_gone() -> None:
    asked: list[str] = []
    single = _single_host(asked)

    with pytest.raises(WorkerHostNotConfigured):
        single.release("lease-1", "b/c0ffee")
    with pytest.raises(WorkerHostNotConfigured):
        single.logs("lease-1", "b/c0ffee", LogQuery())
    assert single.stopped_reason("lease-1", "b/c0ffee") is None
    assert not single.vouches_for("b/c0ffee") and single.vouches_for("c0ffee")
    assert asked == []  # its engine was never asked about another host's worker


def test_a_single_host_takes_its_own_fleet_tokens_as_default() -> None:
    asked: list[str] = []

    with pytest.raises(ProviderRequestFailed):
        _single_host(asked).release("lease-1", "default/c0ffee")
    assert asked == ["connect"]


def test_retiring_a_fleet_host_is_honoured_after_going_back_to_a_single_docker_host() -> None:
    settings = LocalDockerSettings.from_environ({"DOCKER_HOST": "tcp://127.0.0.1:9", "DOCKER_RETIRED_HOSTS": "gpu-b"})

    note = build(settings).release("lease-1", "gpu-b/c0ffee")

    assert note is not None and "Docker host gpu-b was retired by the operator" in note


def test_a_single_hosts_reads_take_a_retired_hosts_worker_for_gone() -> None:
    asked: list[str] = []
    single = _single_host(asked, retired=("b",))

    assert "retired" in str(single.stopped_reason("lease-1", "b/c0ffee"))
    assert single.readiness("lease-1", "b/c0ffee").state is ReadinessState.FAILED
    with pytest.raises(WorkerGone, match="retired"):
        single.logs("lease-1", "b/c0ffee", LogQuery())
    assert single.vouches_for("b/c0ffee")  # the reconciler may end its leases
    assert asked == []


def test_a_single_host_matches_its_own_fleet_tokens_to_its_listing() -> None:
    single = _single_host([])

    assert single.worker_key("default/c0ffee") == single.worker_key("c0ffee") == "c0ffee"
    assert single.vouches_for("default/c0ffee")
    assert single.worker_key("b/c0ffee") != "c0ffee" and not single.vouches_for("b/c0ffee")


class _Engine:
    """Just enough of a Docker engine for readiness: every container it holds is running."""

    host, cert_dir, version_settled = "tcp://127.0.0.1:9", None, True

    def __init__(self, containers: set[str]) -> None:
        self.containers = containers
        self.inspected: list[str] = []

    @contextmanager
    def within(self, deadline: object) -> Iterator[_Engine]:
        yield self

    def inspect_container(self, container: str) -> dict[str, Any]:
        self.inspected.append(container)
        if container not in self.containers:
            raise NotFound("no such container")
        return {"State": {"Status": "running", "Running": True}}


def test_one_worker_on_a_former_fleet_host_does_not_stop_the_single_hosts_readiness_pass() -> None:
    from scheduler.providers.local_docker.driver import LocalDockerProvider

    engine = _Engine({"c0ffee"})
    single = LocalDockerProvider(lambda: engine, {WorkerKind.RENDERER: "r"}, network="none", worker_port=8080)

    answers = single.readiness_of({"gpu-b/0ld": "lease-1", "c0ffee": "lease-2", "default/gone": "lease-3"})

    assert answers == {"c0ffee": Readiness.ready(), "default/gone": answers["default/gone"]}
    assert answers["default/gone"].state is ReadinessState.FAILED
    assert engine.inspected == ["c0ffee", "gone"]  # the other host's worker left unanswered, never asked
