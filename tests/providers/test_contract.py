"""The provider contract (`scheduler/providers/base.py`), one suite every driver passes.

- `memory`: the in-memory reference driver;
- `local-docker`: the real driver on a real Docker engine over mutual TLS (loopback);
- `runpod`: the real driver against the fake of RunPod's REST API v2 in tests/fakes;
- `local-docker-fleet`: the fleet driver (DOCKER_HOSTS) on two real engines, each over mutual TLS;
- `modal`: the real driver, through Modal's own unmodified client, against the fake Modal API server (gRPC).

Each driver also comes pointed at nothing (a closed loopback port), for what unreachability means:
capacity on provision, a failed request everywhere else.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.lifecycle import LeaseStatus
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import (
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    WorkerGone,
    failed_request,
)
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.worker_logs import LogQuery
from tests.fakes.modal import FakeModal, start_fake_modal
from tests.fakes.runpod import FakeRunPod, start_fake_runpod

DRIVERS = ("memory", "local-docker", "runpod", "local-docker-fleet", "modal")


@dataclass
class DriverUnderTest:
    """A driver, the same driver with nothing behind it, and the leases it serves."""

    provider: Provider
    unreachable: Provider
    refusing: Provider  # asked for a worker it must refuse (a missing image or template)
    gpu: GpuClass = GpuClass.NONE
    made: list[Lease] = field(default_factory=list)
    # Makes the worker `token` print `lines` (stdout), as a real worker would.
    write: Callable[[str, list[str]], None] = lambda token, lines: None

    def lease(self) -> Lease:
        now = datetime.now(UTC).replace(microsecond=0)
        lease = Lease(
            lease_id=str(uuid.uuid4()),
            provider=self.provider.name,
            kind=WorkerKind.RENDERER,
            gpu=self.gpu,
            status=LeaseStatus.PENDING,
            created_at=now,
            expires_at=now + timedelta(minutes=10),
            ttl_seconds=600,
        )
        self.made.append(lease)
        return lease

    def request(self) -> LeaseRequest:
        return LeaseRequest(kind=WorkerKind.RENDERER, gpu=self.gpu)

    def listed(self, lease: Lease) -> list[str]:
        return [worker.token for worker in self.provider.list_managed() if worker.lease_id == lease.lease_id]

    def clean_up(self) -> None:
        for lease in self.made:
            try:
                self.provider.release(lease.lease_id, None)
            except Exception:  # noqa: S112 - best effort after a failed test
                continue


@pytest.fixture(scope="module")
def closed_port() -> Iterator[int]:
    """A loopback port bound but never listening, so connections to it are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


@pytest.fixture(scope="module")
def runpod_server() -> Iterator[FakeRunPod]:
    with start_fake_runpod("contract-key", {"tpl-renderer": {"ports": ["8080/http"]}}) as fake:
        yield fake


@pytest.fixture(scope="module")
def modal_server() -> Iterator[FakeModal]:
    with start_fake_modal(known_images={"openalice/renderer:1"}) as fake:
        yield fake


def _memory(**_: Any) -> DriverUnderTest:
    provider = MemoryProvider()
    return DriverUnderTest(
        provider, MemoryProvider(unreachable=True), MemoryProvider(refuse=True), write=provider.write_lines
    )


def _local_docker(request: pytest.FixtureRequest, closed_port: int) -> DriverUnderTest:
    from devstack.worker_image import WORKER_IMAGES
    from scheduler.providers.local_docker import LocalDockerSettings
    from scheduler.providers.local_docker.factory import from_settings

    env = request.getfixturevalue("docker_host").env()

    def driver(host: str, image: str = WORKER_IMAGES["renderer"]) -> Provider:
        settings = LocalDockerSettings(
            docker_host=host,
            docker_tls_verify="1",
            docker_cert_path=env["DOCKER_CERT_PATH"],
            docker_network="none",
            renderer_image=image,
            anim_image=WORKER_IMAGES["anim"],
        )
        return from_settings(settings)

    docker_client = request.getfixturevalue("docker_client")

    def write(token: str, lines: list[str]) -> None:
        # What the container's main process prints: its stdout is the engine's log of it.
        script = "".join(f"echo '{line}' > /proc/1/fd/1; " for line in lines)
        assert docker_client.containers.get(token).exec_run(["sh", "-c", script]).exit_code == 0

    return DriverUnderTest(
        driver(env["DOCKER_HOST"]),
        driver(f"tcp://127.0.0.1:{closed_port}"),
        driver(env["DOCKER_HOST"], image="openalice/never-imported:1"),
        write=write,
    )


def _runpod(request: pytest.FixtureRequest, closed_port: int) -> DriverUnderTest:
    from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider

    fake: FakeRunPod = request.getfixturevalue("runpod_server")
    fake.reset()

    def driver(url: str, template: str = "tpl-renderer") -> Provider:
        return RunPodProvider(
            api=RunPodApi(url, lambda: "contract-key"),
            templates={WorkerKind.RENDERER: template, WorkerKind.ANIM: template},
            gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
            http_port=8080,
            retry=RetryPolicy(sleep=lambda _: None, total_seconds=5, release_confirm_seconds=5),
        )

    return DriverUnderTest(
        driver(fake.url),
        driver(f"http://127.0.0.1:{closed_port}"),
        driver(fake.url, template="tpl-missing"),
        gpu=GpuClass.HIGH,
        write=lambda token, lines: fake.append_pod_log(token, *lines, source="container") and None,
    )


def _local_docker_fleet(request: pytest.FixtureRequest, closed_port: int) -> DriverUnderTest:
    import json

    from devstack.worker_image import WORKER_IMAGES
    from scheduler.providers.local_docker import LocalDockerSettings
    from scheduler.providers.local_docker.factory import fleet_from_settings

    engines = [request.getfixturevalue(name) for name in ("docker_host", "docs_style_host")]

    def fleet(hosts: list[str], image: str = WORKER_IMAGES["renderer"]) -> Provider:
        listed = [
            {"name": f"h{index}", "host": host, "cert_path": str(engine.cert_path)}
            for index, (host, engine) in enumerate(zip(hosts, engines, strict=True))
        ]
        settings = LocalDockerSettings.from_environ(
            {"DOCKER_HOSTS": json.dumps(listed), "DOCKER_NETWORK": "none", "RENDERER_IMAGE": image}
        )
        return fleet_from_settings(settings)

    def write(token: str, lines: list[str]) -> None:
        # A fleet token is `<host>/<container id>`: print on the engine of that host.
        host, container = token.split("/", 1)
        client = engines[int(host.removeprefix("h"))].client()
        try:
            script = "".join(f"echo '{line}' > /proc/1/fd/1; " for line in lines)
            assert client.containers.get(container).exec_run(["sh", "-c", script]).exit_code == 0
        finally:
            client.close()

    return DriverUnderTest(
        fleet([engine.host for engine in engines]),
        fleet([f"tcp://127.0.0.1:{closed_port}"] * 2),
        fleet([engine.host for engine in engines], image="openalice/never-imported:1"),
        write=write,
    )


def _modal(request: pytest.FixtureRequest, closed_port: int) -> DriverUnderTest:
    from scheduler.providers.modal.driver import ModalProvider
    from scheduler.providers.modal.session import ModalSession

    fake: FakeModal = request.getfixturevalue("modal_server")
    fake.reset()

    def driver(url: str, image: str = "openalice/renderer:1") -> Provider:
        return ModalProvider(
            ModalSession(url, lambda: fake.token, "contract-workers"),
            images={WorkerKind.RENDERER: image, WorkerKind.ANIM: image},
            gpu_types={GpuClass.HIGH: ("H100",)},
            prices={"H100": 3.9492},
            create_seconds=8,
            call_seconds=2,
            release_confirm_seconds=5,
        )

    return DriverUnderTest(
        driver(fake.url),
        driver(f"http://127.0.0.1:{closed_port}"),
        driver(fake.url, image="openalice/never-pushed:1"),
        gpu=GpuClass.HIGH,
        write=fake.write_logs,
    )


BUILDERS: dict[str, Callable[..., DriverUnderTest]] = {
    "memory": _memory,
    "local-docker": _local_docker,
    "runpod": _runpod,
    "local-docker-fleet": _local_docker_fleet,
    "modal": _modal,
}


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest, closed_port: int) -> Iterator[DriverUnderTest]:
    built = BUILDERS[request.param](request=request, closed_port=closed_port)
    yield built
    built.clean_up()


# --- provision ------------------------------------------------------------------------------------


def test_a_driver_serves_the_requests_it_says_it_can(driver: DriverUnderTest) -> None:
    assert driver.provider.available(driver.request()) is True


def test_a_provisioned_worker_is_listed_with_its_lease_id(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {"SCENE": "intro"})
    assert driver.listed(lease) == [worker.token]


def test_a_worker_its_provider_ends_by_itself_outlives_its_lease(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    assert worker.ends_at is None or worker.ends_at >= lease.expires_at


def test_a_refused_worker_raises_a_failed_request_and_leaves_nothing(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    with pytest.raises(ProviderRequestFailed):
        driver.refusing.provision(lease, {})
    assert driver.listed(lease) == []


def test_an_unreachable_provider_is_capacity_on_provision(driver: DriverUnderTest) -> None:
    with pytest.raises(ProviderCapacityError):
        driver.unreachable.provision(driver.lease(), {})


# --- release --------------------------------------------------------------------------------------


def test_a_released_worker_is_gone(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.provider.release(lease.lease_id, worker.token)
    assert driver.listed(lease) == []


def test_a_worker_is_released_by_its_lease_id_alone(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    driver.provider.provision(lease, {})
    driver.provider.release(lease.lease_id, None)
    assert driver.listed(lease) == []


def test_releasing_a_worker_that_is_gone_already_is_fine(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.provider.release(lease.lease_id, worker.token)
    driver.provider.release(lease.lease_id, worker.token)


def test_releasing_a_lease_that_never_had_a_worker_is_fine(driver: DriverUnderTest) -> None:
    driver.provider.release(driver.lease().lease_id, None)


def test_an_unreachable_provider_is_a_failed_request_on_release(driver: DriverUnderTest) -> None:
    with pytest.raises((ProviderRequestFailed, ProviderUnreachable)):
        driver.unreachable.release(driver.lease().lease_id, None)
    with pytest.raises(ProviderRequestFailed), failed_request():  # what every caller of release applies
        driver.unreachable.release(driver.lease().lease_id, None)


# --- listing and checks -----------------------------------------------------------------------------


def test_an_unreachable_provider_cannot_be_listed_rather_than_listing_nothing(driver: DriverUnderTest) -> None:
    with pytest.raises((ProviderRequestFailed, ProviderUnreachable)):
        driver.unreachable.list_managed()


def test_a_running_worker_is_not_among_the_stopped_ones(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    assert worker.token not in [stopped.token for stopped in driver.provider.stopped_workers()]
    assert driver.provider.stopped_reason(lease.lease_id, worker.token) is None


# --- readiness ----------------------------------------------------------------------------------------


def test_a_provisioned_worker_becomes_ready_and_says_so_alone_and_in_a_batch(driver: DriverUnderTest) -> None:
    from scheduler.providers.base import ReadinessState

    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    assert driver.provider.readiness(lease.lease_id, worker.token).state is ReadinessState.READY
    batch = driver.provider.readiness_of({worker.token: lease.lease_id})
    assert {token: said.state for token, said in batch.items()} == {worker.token: ReadinessState.READY}


def test_a_removed_worker_will_never_be_ready(driver: DriverUnderTest) -> None:
    from scheduler.providers.base import ReadinessState

    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.provider.release(lease.lease_id, worker.token)
    said = driver.provider.readiness(lease.lease_id, worker.token)
    assert said.state is ReadinessState.FAILED and said.detail


def test_an_unreachable_provider_cannot_say_whether_a_worker_is_ready(driver: DriverUnderTest) -> None:
    with pytest.raises(ProviderRequestFailed), failed_request():
        driver.unreachable.readiness(driver.lease().lease_id, "some-token")


# --- logs -----------------------------------------------------------------------------------------


def _texts(driver: DriverUnderTest, lease: Lease, token: str | None, query: LogQuery) -> list[str]:
    return [line.text for line in driver.provider.logs(lease.lease_id, token, query) if line.source != "system"]


def test_a_workers_logs_are_what_it_printed_oldest_first(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.write(worker.token, ["rendering frame 1", "rendering frame 2", "done"])
    assert _texts(driver, lease, worker.token, LogQuery(tail=100))[-3:] == [
        "rendering frame 1",
        "rendering frame 2",
        "done",
    ]


def test_logs_are_found_by_the_lease_id_alone(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.write(worker.token, ["hello"])
    assert _texts(driver, lease, None, LogQuery(tail=10))[-1:] == ["hello"]


def test_logs_give_the_last_tail_lines(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.write(worker.token, [f"line {number}" for number in range(1, 8)])
    lines = driver.provider.logs(lease.lease_id, worker.token, LogQuery(tail=3))
    assert [line.text for line in lines] == ["line 5", "line 6", "line 7"]


def test_logs_since_a_time_leave_out_older_lines(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.write(worker.token, ["first", "second"])
    stamps = driver.provider.logs(lease.lease_id, worker.token, LogQuery(tail=100))
    since = stamps[-1].at_ns
    driver.write(worker.token, ["third"])
    lines = driver.provider.logs(lease.lease_id, worker.token, LogQuery(tail=100, since_ns=since))
    assert all(line.at_ns >= since for line in lines)
    assert [line.text for line in lines][-2:] == ["second", "third"]


def test_the_logs_of_a_released_worker_are_gone(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})
    driver.provider.release(lease.lease_id, worker.token)
    with pytest.raises(WorkerGone):
        driver.provider.logs(lease.lease_id, worker.token, LogQuery())
    with pytest.raises(WorkerGone):
        driver.provider.logs(lease.lease_id, None, LogQuery())


def test_an_unreachable_provider_cannot_serve_logs(driver: DriverUnderTest) -> None:
    with pytest.raises((ProviderRequestFailed, ProviderUnreachable)):
        driver.unreachable.logs(driver.lease().lease_id, None, LogQuery())


# --- prices and regions ---------------------------------------------------------------------------


def test_a_worker_never_costs_more_per_hour_than_the_leases_ceiling(driver: DriverUnderTest) -> None:
    ceiling = 0.000001
    lease = driver.lease().replace(max_cost_per_hour=ceiling)
    try:
        worker = driver.provider.provision(lease, {})
    except ProviderCapacityError:
        assert driver.listed(lease) == []
        return
    assert worker.cost_per_hour is None or worker.cost_per_hour <= ceiling


def test_a_price_bound_is_a_price_or_unknown_and_never_raises(driver: DriverUnderTest) -> None:
    for provider in (driver.provider, driver.unreachable):
        bound = provider.price_bound(driver.request())
        assert bound is None or bound >= 0


def test_regions_are_names_or_none(driver: DriverUnderTest) -> None:
    regions = driver.provider.regions()
    assert regions is None or all(isinstance(region, str) and region for region in regions)


def test_a_driver_vouches_for_the_workers_its_listing_covered(driver: DriverUnderTest) -> None:
    lease = driver.lease()
    worker = driver.provider.provision(lease, {})

    assert driver.listed(lease) == [worker.token]
    assert driver.provider.vouches_for(worker.token) is True
