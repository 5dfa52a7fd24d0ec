"""The fake Modal API server, driven by Modal's own unmodified client: each documented behaviour it models."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import modal
import modal.exception as modal_errors
import pytest
import requests
from modal_proto import api_pb2

from tests.fakes.modal import FakeModal, start_fake_modal, tunnel_host

REPO = Path(__file__).resolve().parents[2]
IMAGE = "openalice/renderer:1"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModal]:
    with start_fake_modal(known_images={IMAGE}, control_port=0) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeModal) -> FakeModal:
    server.reset()
    return server


def client_of(fake: FakeModal, token: tuple[str, str] | None = None) -> Any:
    client = modal.Client(fake.url, api_pb2.CLIENT_TYPE_CLIENT, token or fake.token)
    client.__enter__()
    return client


def create(fake: FakeModal, client: Any = None, **options: Any) -> Any:
    client = client or client_of(fake)
    app = modal.App.lookup("fake-test", create_if_missing=True, client=client)
    options.setdefault("gpu", "L4")
    return modal.Sandbox.create(app=app, image=modal.Image.from_registry(IMAGE), client=client, **options)


def test_a_sandbox_runs_with_its_tunnel_until_terminated_which_takes_a_moment(fake: FakeModal) -> None:
    fake.configure(terminate_seconds=0.5)
    sandbox = create(fake, encrypted_ports=[8080])
    assert sandbox.poll() is None
    assert sandbox.tunnels()[8080].url == f"https://{tunnel_host(sandbox.object_id, 8080)}"
    sandbox.terminate()
    assert sandbox.poll() is None and fake.sandbox(sandbox.object_id)["status"] == "terminating"
    time.sleep(0.6)
    assert sandbox.poll() == 137


def test_a_slow_start_is_scheduled_late_and_its_tunnel_later(fake: FakeModal) -> None:
    fake.configure(schedule_seconds=0.5, tunnel_seconds=0.5)
    started = time.monotonic()
    sandbox = create(fake, encrypted_ports=[8080])
    assert time.monotonic() - started >= 0.4
    with pytest.raises(modal_errors.SandboxTimeoutError):
        sandbox.tunnels(timeout=0)
    assert sandbox.tunnels(timeout=2)[8080].host


def test_a_gpu_type_out_of_capacity_is_never_scheduled(fake: FakeModal) -> None:
    fake.configure(no_capacity_gpus={"H100"})
    sandbox_ids: list[str] = []
    client = client_of(fake)
    app = modal.App.lookup("fake-test", create_if_missing=True, client=client)
    import asyncio

    async def attempt() -> None:
        made = await modal.Sandbox.create.aio(
            app=app, image=modal.Image.from_registry(IMAGE), gpu="H100", client=client
        )
        sandbox_ids.append(made.object_id)

    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(attempt(), 1.5))
    (sandbox,) = fake.sandboxes()
    assert sandbox["gpu"] == "H100" and sandbox_ids == []  # queued; the client terminates what it gave up on


def test_a_sandbox_ends_at_its_timeout(fake: FakeModal) -> None:
    sandbox = create(fake, timeout=60)
    fake.advance(61)
    assert sandbox.poll() == 124


def test_a_boot_exit_ends_the_sandbox_with_its_code(fake: FakeModal) -> None:
    fake.configure(boot_exit_code=2, boot_exit_message="no GPU driver")
    sandbox = create(fake)
    assert sandbox.poll() == 2
    assert any("no GPU driver" in entry.message for entry in sandbox.logs.tail(10))


def test_a_refused_token_is_unauthenticated(fake: FakeModal) -> None:
    with pytest.raises(modal_errors.AuthError):
        create(fake, client_of(fake, ("ak-test", "wrong")))


def test_the_workspace_quota_is_resource_exhausted(fake: FakeModal) -> None:
    fake.configure(quota_max_sandboxes=1)
    create(fake)
    with pytest.raises(modal_errors.ResourceExhaustedError, match="limit"):
        create(fake)


def test_throttling_carries_a_retry_policy_the_client_waits_out(fake: FakeModal) -> None:
    fake.configure(throttle_next=1, throttle_retry_after=0.3)
    started = time.monotonic()
    create(fake)
    assert time.monotonic() - started >= 0.3 and "AppGetOrCreate" in fake.calls


def test_an_unavailable_server_is_a_service_error(fake: FakeModal) -> None:
    client = client_of(fake)
    fake.configure(unavailable=True)
    with pytest.raises((modal_errors.ServiceError, modal_errors.ConnectionError)):
        modal.App.lookup("fake-test", create_if_missing=True, client=client)


def test_an_image_not_in_the_registry_fails_its_build(fake: FakeModal) -> None:
    client = client_of(fake)
    app = modal.App.lookup("fake-test", create_if_missing=True, client=client)
    with pytest.raises(modal_errors.ImageBuildError, match="Failed to pull"):
        modal.Sandbox.create(app=app, image=modal.Image.from_registry("nope:1"), gpu="L4", client=client)


def test_a_name_is_unique_among_an_apps_live_sandboxes(fake: FakeModal) -> None:
    client = client_of(fake)
    first = create(fake, client, name="lease-1")
    with pytest.raises(modal_errors.AlreadyExistsError):
        create(fake, client, name="lease-1")
    first.terminate()
    fake.advance(1)
    create(fake, client, name="lease-1")


def test_listing_by_tags_returns_the_live_sandboxes_that_carry_them(fake: FakeModal) -> None:
    client = client_of(fake)
    fake.configure(list_page_size=2)  # the client pages with before_timestamp
    tagged = [create(fake, client, tags={"team": "a"}).object_id for _ in range(3)]
    create(fake, client, tags={"team": "b"})
    done = create(fake, client, tags={"team": "a"})
    done.terminate()
    fake.advance(1)
    app = modal.App.lookup("fake-test", client=client)
    listed = [sandbox.object_id for sandbox in modal.Sandbox.list(app_id=app.app_id, tags={"team": "a"}, client=client)]
    assert sorted(listed) == sorted(tagged)


def test_logs_are_read_back_by_tail_and_since(fake: FakeModal) -> None:
    from datetime import UTC, datetime, timedelta

    sandbox = create(fake)
    fake.write_logs(sandbox.object_id, ["one", "two"])
    fake.write_logs(sandbox.object_id, ["oops"], source="stderr")
    tail = [(entry.source, entry.message.strip()) for entry in sandbox.logs.tail(2)]
    assert tail == [("stdout", "two"), ("stderr", "oops")]
    since = datetime.now(UTC) - timedelta(minutes=1)
    fetched = [entry.message.strip() for entry in sandbox.logs.fetch(since=since) if entry.source != "system"]
    assert fetched == ["one", "two", "oops"]


def test_every_rpc_it_does_not_implement_says_so(fake: FakeModal) -> None:
    client = client_of(fake)
    with pytest.raises(modal_errors.UnimplementedError, match="does not implement"):
        modal.Volume.from_name("v", create_if_missing=True, client=client).hydrate()


def test_the_control_port_configures_and_reports(fake: FakeModal) -> None:
    assert fake.control_url is not None
    answer = requests.post(fake.control_url + "/_fake/config", json={"schedule_seconds": 0.1}, timeout=5)
    assert answer.json()["config"]["schedule_seconds"] == 0.1
    sandbox = create(fake)
    state = requests.get(fake.control_url + "/_fake/state", timeout=5).json()
    assert [each["id"] for each in state["sandboxes"]] == [sandbox.object_id]


def test_the_cli_serves_and_prints_its_url() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.modal", "--port", "0", "--control-port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = modal.Client(url, api_pb2.CLIENT_TYPE_CLIENT, ("ak-dev", "as-dev"))
        client.__enter__()
        assert modal.App.lookup("cli", create_if_missing=True, client=client).app_id.startswith("ap-")
    finally:
        process.terminate()
        process.wait(timeout=10)
