"""The `local-docker` driver against a real Docker Engine over mutual TLS (loopback only, no mocks).

Every container here runs with network `none` or `host`; each test cleans up what it created.
"""

from __future__ import annotations

import re
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import docker  # type: ignore[import-untyped]
import docker.errors  # type: ignore[import-untyped]
import pytest

from devstack.docker_tls import generate_untrusted_client
from devstack.worker_image import WORKER_IMAGES
from scheduler.lifecycle import LeaseStatus
from scheduler.models import GpuClass, Lease, WorkerKind, format_time
from scheduler.providers.base import (
    KIND_LABEL,
    LEASE_ID_LABEL,
    MANAGED_LABEL,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
)
from scheduler.providers.docker_engine.client import connect
from scheduler.providers.local_docker import LocalDockerSettings
from scheduler.providers.local_docker.driver import LocalDockerProvider
from scheduler.providers.local_docker.factory import from_settings
from scheduler.request_models import LeaseRequest

IMAGES = {WorkerKind.RENDERER: WORKER_IMAGES["renderer"], WorkerKind.ANIM: WORKER_IMAGES["anim"]}
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

ProviderFactory = Callable[..., LocalDockerProvider]


def _lease(kind: WorkerKind = WorkerKind.RENDERER, gpu: GpuClass = GpuClass.NONE, ttl_seconds: int = 600) -> Lease:
    created_at = datetime.now(UTC).replace(microsecond=0)
    return Lease(
        lease_id=str(uuid.uuid4()),
        provider="local-docker",
        kind=kind,
        gpu=gpu,
        status=LeaseStatus.PENDING,
        created_at=created_at,
        expires_at=created_at + timedelta(seconds=ttl_seconds),
        ttl_seconds=ttl_seconds,
    )


def _containers_of(client: docker.DockerClient, lease_id: str) -> list[Any]:
    """Every container that belongs to the lease by label or by name, running or not."""
    labelled = client.containers.list(all=True, filters={"label": f"{LEASE_ID_LABEL}={lease_id}"})
    named = client.containers.list(all=True, filters={"name": f"^/lease-{lease_id}$"})
    return list({container.id: container for container in (*labelled, *named)}.values())


def _refused(call: Callable[[], object]) -> bool:
    """Whether the driver's call was refused (rather than answered) by the Docker host."""
    try:
        call()
    except (ProviderUnreachable, ProviderRequestFailed):
        return True
    return False


def _container_env(client: docker.DockerClient, lease: Lease) -> dict[str, str]:
    variables = client.containers.get(f"lease-{lease.lease_id}").attrs["Config"]["Env"] or []
    return dict(variable.split("=", 1) for variable in variables)


@pytest.fixture
def new_lease(docker_client: docker.DockerClient) -> Iterator[Callable[..., Lease]]:
    """Make leases with fresh ids; remove whatever containers they got afterwards."""
    made: list[str] = []

    def make(**kwargs: Any) -> Lease:
        lease = _lease(**kwargs)
        made.append(lease.lease_id)
        return lease

    yield make
    for lease_id in made:
        for container in _containers_of(docker_client, lease_id):
            container.remove(force=True)


@pytest.fixture
def make_provider(docker_host: Any) -> Iterator[ProviderFactory]:
    """Build drivers on the TLS host (or on an overridden environment); close their clients afterwards."""
    clients: list[docker.APIClient] = []

    def make(
        environment: Mapping[str, str] | None = None,
        *,
        network: str = "none",
        images: Mapping[WorkerKind, str] = IMAGES,
    ) -> LocalDockerProvider:
        env = dict(docker_host.env() if environment is None else environment)

        def connected() -> docker.APIClient:
            client = connect(env)
            clients.append(client)
            return client

        return LocalDockerProvider(connect=connected, images=images, network=network, worker_port=8080)

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def provider(make_provider: ProviderFactory) -> LocalDockerProvider:
    return make_provider()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound but never listening, so connections to it are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


@pytest.fixture
def unreachable_provider(docker_host: Any, make_provider: ProviderFactory, closed_port: int) -> LocalDockerProvider:
    return make_provider({**docker_host.env(), "DOCKER_HOST": f"tcp://127.0.0.1:{closed_port}"})


# --- provision -----------------------------------------------------------------------------


def test_provision_starts_one_running_container_named_for_the_lease(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()

    provider.provision(lease, {})

    containers = _containers_of(docker_client, lease.lease_id)
    assert [container.name for container in containers] == [f"lease-{lease.lease_id}"]
    assert containers[0].status == "running"


def test_provision_labels_the_container_managed_with_lease_id_and_kind(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease(kind=WorkerKind.ANIM)

    provider.provision(lease, {})

    labels = docker_client.containers.get(f"lease-{lease.lease_id}").labels
    assert labels == {MANAGED_LABEL: "true", LEASE_ID_LABEL: lease.lease_id, KIND_LABEL: "anim"}


def test_provision_runs_the_image_configured_for_the_lease_kind(
    make_provider: ProviderFactory, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    repository = f"openalice/anim-{uuid.uuid4().hex[:8]}"
    docker_client.images.get(IMAGES[WorkerKind.ANIM]).tag(repository, "dev")
    provider = make_provider(images={**IMAGES, WorkerKind.ANIM: f"{repository}:dev"})
    lease = new_lease(kind=WorkerKind.ANIM)
    try:
        provider.provision(lease, {})
        image = docker_client.containers.get(f"lease-{lease.lease_id}").attrs["Config"]["Image"]
    finally:
        docker_client.images.remove(f"{repository}:dev", force=True)

    assert image == f"{repository}:dev"


def test_provision_passes_the_request_env_plus_lease_id_and_expiry(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease(ttl_seconds=900)

    provider.provision(lease, {"SCENE": "intro", "QUALITY": "high=1 two words"})

    env = _container_env(docker_client, lease)
    assert env["SCENE"] == "intro"
    assert env["QUALITY"] == "high=1 two words"
    assert env["LEASE_ID"] == lease.lease_id
    assert RFC3339_Z.fullmatch(env["LEASE_EXPIRES_AT"])
    assert env["LEASE_EXPIRES_AT"] == format_time(lease.expires_at)


def test_provision_env_cannot_override_the_lease_id_or_expiry(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()

    provider.provision(lease, {"LEASE_ID": "someone-else", "LEASE_EXPIRES_AT": "2099-01-01T00:00:00Z"})

    env = _container_env(docker_client, lease)
    assert env["LEASE_ID"] == lease.lease_id
    assert env["LEASE_EXPIRES_AT"] == format_time(lease.expires_at)


def test_provision_uses_the_configured_network_mode(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()

    provider.provision(lease, {})

    assert docker_client.containers.get(f"lease-{lease.lease_id}").attrs["HostConfig"]["NetworkMode"] == "none"


def test_provision_returns_the_container_id_as_token(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()

    worker = provider.provision(lease, {})

    assert worker.token == docker_client.containers.get(f"lease-{lease.lease_id}").id


def test_provision_on_network_none_has_no_endpoint(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    assert provider.provision(new_lease(), {}).endpoint is None


def test_provision_on_network_host_advertises_the_docker_host_address_and_worker_port(
    docker_host: Any, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    environment = docker_host.env()
    provider = from_settings(
        LocalDockerSettings(
            docker_host=environment["DOCKER_HOST"],
            docker_tls_verify=environment.get("DOCKER_TLS_VERIFY"),
            docker_cert_path=environment["DOCKER_CERT_PATH"],
            renderer_image=IMAGES[WorkerKind.RENDERER],
            anim_image=IMAGES[WorkerKind.ANIM],
            docker_network="host",
            worker_port=18080,
        )
    )
    lease = new_lease()

    worker = provider.provision(lease, {})

    assert worker.endpoint == "http://127.0.0.1:18080"
    assert docker_client.containers.get(worker.token).attrs["HostConfig"]["NetworkMode"] == "host"


def test_provision_of_entry_gpu_without_a_gpu_raises_capacity_error_and_leaves_nothing(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease(gpu=GpuClass.ENTRY)

    with pytest.raises(ProviderCapacityError) as raised:
        provider.provision(lease, {})

    assert not isinstance(raised.value, ProviderUnreachable)
    assert _containers_of(docker_client, lease.lease_id) == []


def test_provision_of_a_missing_image_raises_request_failed_and_leaves_nothing(
    make_provider: ProviderFactory, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    missing = f"openalice/missing-{uuid.uuid4().hex[:8]}:dev"
    provider = make_provider(images={WorkerKind.RENDERER: missing, WorkerKind.ANIM: missing})
    lease = new_lease()

    with pytest.raises(ProviderRequestFailed, match="missing"):
        provider.provision(lease, {})

    assert _containers_of(docker_client, lease.lease_id) == []


def test_provision_on_an_unreachable_host_raises_unreachable(
    unreachable_provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    with pytest.raises(ProviderUnreachable):
        unreachable_provider.provision(new_lease(), {})


# --- release -------------------------------------------------------------------------------


def test_release_removes_the_container_before_returning(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()
    worker = provider.provision(lease, {})

    provider.release(lease.lease_id, worker.token)

    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(worker.token)
    assert _containers_of(docker_client, lease.lease_id) == []


def test_release_of_an_already_removed_container_succeeds(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()
    worker = provider.provision(lease, {})
    docker_client.containers.get(worker.token).remove(force=True)

    provider.release(lease.lease_id, worker.token)
    provider.release(lease.lease_id, worker.token)

    assert _containers_of(docker_client, lease.lease_id) == []


def test_release_without_a_token_removes_the_container_named_for_the_lease(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()
    provider.provision(lease, {})

    provider.release(lease.lease_id, None)

    assert _containers_of(docker_client, lease.lease_id) == []


def test_release_without_a_token_of_a_lease_that_never_got_a_container_succeeds(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    provider.release(new_lease().lease_id, None)


def test_release_leaves_other_leases_containers_running(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    released, kept = new_lease(), new_lease()
    worker = provider.provision(released, {})
    provider.provision(kept, {})

    provider.release(released.lease_id, worker.token)

    assert docker_client.containers.get(f"lease-{kept.lease_id}").status == "running"


def test_release_on_an_unreachable_host_raises_request_failed(
    unreachable_provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    with pytest.raises(ProviderRequestFailed):
        unreachable_provider.release(new_lease().lease_id, None)


# --- list_managed --------------------------------------------------------------------------


def test_list_managed_reports_each_managed_container_with_its_lease_id_and_creation_time(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    first, second = new_lease(), new_lease(kind=WorkerKind.ANIM)
    tokens = {
        first.lease_id: provider.provision(first, {}).token,
        second.lease_id: provider.provision(second, {}).token,
    }
    after = datetime.now(UTC) + timedelta(seconds=1)

    listed = {worker.lease_id: worker for worker in provider.list_managed() if worker.lease_id in tokens}

    assert {lease_id: worker.token for lease_id, worker in listed.items()} == tokens
    for worker in listed.values():
        assert worker.created_at.tzinfo is not None
        assert before <= worker.created_at <= after


def test_list_managed_includes_stopped_containers(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    lease = new_lease()
    worker = provider.provision(lease, {})
    docker_client.containers.get(worker.token).kill()

    assert worker.token in {listed.token for listed in provider.list_managed()}


def test_list_managed_ignores_containers_without_the_managed_label(
    provider: LocalDockerProvider, new_lease: Callable[..., Lease], docker_client: docker.DockerClient
) -> None:
    unlabelled, unmanaged = new_lease(), new_lease()
    # Named like a lease's worker, and even carrying a lease-id label, but not marked managed.
    docker_client.containers.create(
        IMAGES[WorkerKind.RENDERER], name=f"lease-{unlabelled.lease_id}", network_mode="none"
    )
    docker_client.containers.create(
        IMAGES[WorkerKind.RENDERER],
        network_mode="none",
        labels={LEASE_ID_LABEL: unmanaged.lease_id, MANAGED_LABEL: "false"},
    )

    listed = {worker.lease_id for worker in provider.list_managed()}

    assert unlabelled.lease_id not in listed
    assert unmanaged.lease_id not in listed
    assert "" not in listed


def test_list_managed_on_an_unreachable_host_raises_request_failed(
    unreachable_provider: LocalDockerProvider,
) -> None:
    with pytest.raises(ProviderRequestFailed):
        unreachable_provider.list_managed()


# --- available -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [(GpuClass.NONE, True), (GpuClass.ENTRY, True), (GpuClass.MID, False), (GpuClass.HIGH, False)],
)
def test_available_for_cpu_and_entry_gpu_only(provider: LocalDockerProvider, gpu: GpuClass, expected: bool) -> None:
    assert provider.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=gpu)) is expected


def test_available_is_false_for_a_kind_without_an_image(make_provider: ProviderFactory) -> None:
    provider = make_provider(images={WorkerKind.RENDERER: IMAGES[WorkerKind.RENDERER], WorkerKind.ANIM: ""})

    assert provider.available(LeaseRequest(kind=WorkerKind.RENDERER))
    assert not provider.available(LeaseRequest(kind=WorkerKind.ANIM))


def test_available_needs_no_connection_to_the_host(unreachable_provider: LocalDockerProvider) -> None:
    assert unreachable_provider.available(LeaseRequest(kind=WorkerKind.ANIM))


# --- TLS -----------------------------------------------------------------------------------


def test_ca_bundle_variables_do_not_replace_the_hosts_own_ca(
    monkeypatch: pytest.MonkeyPatch,
    provider: LocalDockerProvider,
    new_lease: Callable[..., Lease],
    docker_client: docker.DockerClient,
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", SYSTEM_CA_BUNDLE)
    monkeypatch.setenv("CURL_CA_BUNDLE", SYSTEM_CA_BUNDLE)
    lease = new_lease()

    worker = provider.provision(lease, {})
    assert worker.token in {listed.token for listed in provider.list_managed()}
    provider.release(lease.lease_id, worker.token)

    assert _containers_of(docker_client, lease.lease_id) == []


def test_a_client_certificate_from_another_ca_is_refused_and_creates_nothing(
    docker_host: Any,
    make_provider: ProviderFactory,
    new_lease: Callable[..., Lease],
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    rogue = generate_untrusted_client(tmp_path / "rogue", server_ca=Path(docker_host.cert_path) / "ca.pem")
    provider = make_provider({**docker_host.env(), "DOCKER_CERT_PATH": str(rogue)})
    lease = new_lease()

    with pytest.raises((ProviderUnreachable, ProviderRequestFailed)) as raised:
        provider.provision(lease, {})

    # "_ALERT_": the daemon ended the handshake, i.e. it (not our side) refused the certificate.
    assert "_ALERT_" in str(raised.value.__cause__)

    assert _containers_of(docker_client, lease.lease_id) == []


def test_a_host_not_signed_by_the_configured_ca_is_refused_and_creates_nothing(
    docker_host: Any,
    make_provider: ProviderFactory,
    new_lease: Callable[..., Lease],
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    # ca.pem is the unrelated CA: the driver must not trust our daemon's server certificate.
    other_ca = generate_untrusted_client(tmp_path / "other-ca")
    provider = make_provider({**docker_host.env(), "DOCKER_CERT_PATH": str(other_ca)})
    lease = new_lease()

    with pytest.raises((ProviderUnreachable, ProviderRequestFailed)) as raised:
        provider.provision(lease, {})

    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value.__cause__)

    assert _containers_of(docker_client, lease.lease_id) == []


def test_a_cert_path_without_tls_verify_still_verifies_the_host_against_its_ca(
    docker_host: Any, make_provider: ProviderFactory, tmp_path: Path
) -> None:
    # Our client certificate (the daemon accepts it) but an unrelated ca.pem: a driver that
    # verified the daemon would refuse it; one that skips verification talks to any impostor.
    mixed = generate_untrusted_client(tmp_path / "mixed")
    for name in ("cert.pem", "key.pem"):
        shutil.copyfile(Path(docker_host.cert_path) / name, mixed / name)
    environment = {"DOCKER_HOST": docker_host.host, "DOCKER_CERT_PATH": str(mixed)}  # no DOCKER_TLS_VERIFY
    provider = make_provider(environment)

    assert _refused(provider.list_managed)


# --- a driver that cannot build its client ---------------------------------------------------


@pytest.fixture
def misconfigured_provider(docker_host: Any, make_provider: ProviderFactory, tmp_path: Path) -> LocalDockerProvider:
    """DOCKER_CERT_PATH names a directory without cert.pem/key.pem/ca.pem, so no client can be built."""
    return make_provider({**docker_host.env(), "DOCKER_CERT_PATH": str(tmp_path)})


def test_provision_without_usable_tls_material_raises_unreachable(
    misconfigured_provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    with pytest.raises(ProviderUnreachable):
        misconfigured_provider.provision(new_lease(), {})


def test_release_without_usable_tls_material_raises_request_failed(
    misconfigured_provider: LocalDockerProvider, new_lease: Callable[..., Lease]
) -> None:
    with pytest.raises(ProviderRequestFailed):
        misconfigured_provider.release(new_lease().lease_id, None)


def test_list_managed_without_usable_tls_material_raises_request_failed(
    misconfigured_provider: LocalDockerProvider,
) -> None:
    with pytest.raises(ProviderRequestFailed):
        misconfigured_provider.list_managed()
