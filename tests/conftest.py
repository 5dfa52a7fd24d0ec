"""Fixtures shared by the integration, provider and devstack tests: a real TLS Docker host and the local stack."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import RunningStack, start_stack

# As in the deployed functions: the service name is set before any module creates its logger, so
# the domain's child loggers and the handlers' loggers are one family whatever the test order.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "openalice-scheduler")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAliceScheduler")

REPO = Path(__file__).resolve().parent.parent


def require_docker() -> None:
    """Skip without dockerd locally; in CI (CI=true) a missing engine is a failure, never a skip."""
    if shutil.which("dockerd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") and os.geteuid() == 0:
        return
    message = "dockerd is not installed (apt-get install docker.io) or not running as root"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def docker_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A loopback dockerd behind mutual TLS, with the worker images imported."""
    require_docker()
    from devstack.docker_host import start_tls_docker_host
    from devstack.worker_image import ensure_worker_images

    host = start_tls_docker_host(tmp_path_factory.mktemp("docker"))
    client = host.client()
    ensure_worker_images(client)
    client.close()
    yield host
    host.stop()


@pytest.fixture(scope="session")
def docs_style_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A loopback dockerd whose certificates are made exactly as Docker's TLS guide makes them (openssl CLI).

    Its CA has no keyUsage extension, which Python 3.13's default verification refuses.
    """
    require_docker()
    from devstack.docker_host import start_tls_docker_host
    from devstack.worker_image import ensure_worker_images
    from tests.support.docs_style_tls import make_docs_style_tls

    state_dir = tmp_path_factory.mktemp("docs-style-docker")
    # start_tls_docker_host keeps the certificates it finds in <state>/certs as long as they chain.
    make_docs_style_tls(state_dir / "certs")
    host = start_tls_docker_host(state_dir)
    client = host.client()
    ensure_worker_images(client)
    client.close()
    yield host
    host.stop()


@pytest.fixture(scope="session")
def docker_client(docker_host: object) -> Iterator[object]:
    """A Docker SDK client on the test host, for checking what the service did."""
    client = docker_host.client()  # type: ignore[attr-defined]
    yield client
    client.close()


@pytest.fixture(scope="module")
def stack(docker_host: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The local stack (`make run`) on the TLS Docker host, sweeping every second."""
    running = start_stack(
        tmp_path_factory.mktemp("stack"),
        docker_env=docker_host.env(),  # type: ignore[attr-defined]
        extra_env={"SWEEP_INTERVAL_SECONDS": "1", "RECONCILE_INTERVAL_SECONDS": "3600"},
    )
    yield running
    running.stop()
