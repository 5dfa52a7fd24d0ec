"""The local-docker driver's readiness on a real engine: running is ready, unless the image has a HEALTHCHECK,
which must pass first; a container that exits while starting failed to boot.

The test images are made with `docker import --change 'HEALTHCHECK …'` (no registry can be reached): on
Engine 20.10 the import keeps the healthcheck in the image's config, as a Dockerfile's HEALTHCHECK would.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import docker  # type: ignore[import-untyped]
import pytest

from devstack.worker_image import WORKER_IMAGES, _busybox_rootfs
from scheduler.models import Lease, WorkerKind
from scheduler.providers.base import Readiness, ReadinessState
from scheduler.providers.local_docker.driver import LocalDockerProvider

from . import test_local_docker as local_docker
from .test_local_docker import ProviderFactory

# The fixtures of the driver's own tests: a driver on the TLS test host, leases whose containers are removed after.
make_provider = local_docker.make_provider
new_lease = local_docker.new_lease
provider = local_docker.provider

HEALTHY_AFTER_2S = "openalice-test/healthcheck:healthy-after-2s"
EXITS_AT_ONCE = "openalice-test/healthcheck:exits"
HEALTHCHECK = 'HEALTHCHECK --interval=1s --timeout=1s --retries=30 CMD ["/bin/sh", "-c", "cat /tmp/up"]'


def _image(client: docker.DockerClient, tag: str, command: str) -> str:
    repository, version = tag.rsplit(":", 1)
    client.api.import_image_from_data(
        _busybox_rootfs(), repository=repository, tag=version, changes=[f"CMD {command}", HEALTHCHECK]
    )
    return tag


@pytest.fixture(scope="module")
def healthcheck_images(docker_client: docker.DockerClient) -> dict[str, str]:
    return {
        "healthy": _image(
            docker_client, HEALTHY_AFTER_2S, '["/bin/sh", "-c", "sleep 2; echo up > /tmp/up; exec sleep 86400"]'
        ),
        "exits": _image(docker_client, EXITS_AT_ONCE, '["/bin/sh", "-c", "exit 3"]'),
    }


def _until(check: Callable[[], Readiness], done: Callable[[Readiness], bool], seconds: float = 30) -> Readiness:
    give_up = time.monotonic() + seconds
    while True:
        said = check()
        if done(said) or time.monotonic() > give_up:
            return said
        time.sleep(0.25)


def test_the_imported_image_carries_its_healthcheck(
    docker_client: docker.DockerClient, healthcheck_images: dict[str, str]
) -> None:
    config = docker_client.images.get(healthcheck_images["healthy"]).attrs["Config"]
    assert config["Healthcheck"]["Test"] == ["CMD", "/bin/sh", "-c", "cat /tmp/up"]


def test_a_container_without_a_healthcheck_is_ready_at_once(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    lease = new_lease()
    worker = provider.provision(lease, {})
    assert worker.ready is True
    assert provider.readiness(lease.lease_id, worker.token).state is ReadinessState.READY


def test_a_container_with_a_healthcheck_is_starting_until_it_is_healthy(
    make_provider: ProviderFactory, new_lease: Callable[..., Lease], healthcheck_images: dict[str, str]
) -> None:
    driver = make_provider(
        images={WorkerKind.RENDERER: healthcheck_images["healthy"], WorkerKind.ANIM: WORKER_IMAGES["anim"]}
    )
    lease = new_lease()
    worker = driver.provision(lease, {})
    first = driver.readiness(lease.lease_id, worker.token)

    later = _until(
        lambda: driver.readiness(lease.lease_id, worker.token), lambda said: said.state is not ReadinessState.STARTING
    )

    assert worker.ready is False and first.state is ReadinessState.STARTING and first.detail.startswith("healthcheck")
    assert later.state is ReadinessState.READY


def test_a_container_that_exits_while_starting_failed_to_boot(
    make_provider: ProviderFactory, new_lease: Callable[..., Lease], healthcheck_images: dict[str, str]
) -> None:
    driver = make_provider(
        images={WorkerKind.RENDERER: healthcheck_images["exits"], WorkerKind.ANIM: WORKER_IMAGES["anim"]}
    )
    lease = new_lease()
    worker = driver.provision(lease, {})

    said = _until(
        lambda: driver.readiness(lease.lease_id, worker.token), lambda said: said.state is not ReadinessState.STARTING
    )

    assert said.state is ReadinessState.FAILED and "exited with code 3" in said.detail
