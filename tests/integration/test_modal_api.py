"""Modal as the third provider, through the public API of the local stack: RunPod out of stock for gpu=high,
Modal serves it (endpoint, cost), its logs, its release confirmed, an orphaned Sandbox removed by the reconciler,
a renewal past the Sandbox's own timeout refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.fakes.modal import FakeModal, start_fake_modal, tunnel_host
from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

H100 = "NVIDIA H100 80GB HBM3"
RENDERER = "openalice/renderer:1"


@pytest.fixture(scope="module")
def runpod() -> Iterator[FakeRunPod]:
    with start_fake_runpod("stack-key", {"tpl-renderer": {"ports": ["8080/http"]}}) as server:
        server.configure(no_capacity_gpu_ids={H100})
        yield server


@pytest.fixture(scope="module")
def modal_fake() -> Iterator[FakeModal]:
    with start_fake_modal(known_images={RENDERER}) as server:
        yield server


@pytest.fixture(scope="module")
def stack(
    docker_host: Any, runpod: FakeRunPod, modal_fake: FakeModal, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    token_id, token_secret = modal_fake.token
    running = start_stack(
        tmp_path_factory.mktemp("modal-stack"),
        docker_env=docker_host.env(),
        extra_env={
            "PROVIDERS": "runpod,modal",
            "RUNPOD_API_URL": runpod.url,
            "RUNPOD_API_KEY": "stack-key",
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_GPU_TYPES_HIGH": H100,
            "MODAL_SERVER_URL": modal_fake.url,
            "MODAL_TOKEN_ID": token_id,
            "MODAL_TOKEN_SECRET": token_secret,
            "MODAL_APP_NAME": "stack-workers",
            "MODAL_RENDERER_IMAGE": RENDERER,
            "MODAL_GPU_TYPES_HIGH": "H100",
            "ORPHAN_GRACE_SECONDS": "0",
            "SWEEP_INTERVAL_SECONDS": "1",
            "RECONCILE_INTERVAL_SECONDS": "2",
        },
    )
    yield running
    running.stop()


def test_runpod_out_of_stock_for_high_is_served_by_modal(stack: RunningStack, modal_fake: FakeModal) -> None:
    response = stack.acquire(gpu="high", owner_id="render-farm", ttl_seconds=900)

    assert response.status_code == 201, response.text
    lease = response.json()["lease"]
    assert response.json()["provider"] == "modal" == lease["provider"]
    sandbox = modal_fake.sandbox(lease["provider_token"])
    assert sandbox["gpu"] == "H100" and sandbox["name"] == f"lease-{lease['lease_id']}"
    assert lease["endpoint"] == f"https://{tunnel_host(sandbox['id'], 8080)}"
    assert lease["cost_per_hour"] == 3.9492
    ready = stack.request("GET", f"/v1/lease/{lease['lease_id']}", params={"wait_ready": 10}).json()["lease"]
    assert ready["worker_state"] == "ready"


def test_a_modal_workers_logs_and_its_confirmed_release(stack: RunningStack, modal_fake: FakeModal) -> None:
    lease = stack.acquire(gpu="high", owner_id="render-farm").json()["lease"]
    modal_fake.write_logs(lease["provider_token"], ["rendering frame 1", "done"])

    logs = stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner="render-farm", params={"tail": 50})
    assert logs.status_code == 200 and logs.text.splitlines()[-2:] == ["rendering frame 1", "done"]

    released = stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="render-farm")
    assert released.status_code == 204
    assert modal_fake.sandbox(lease["provider_token"])["status"] == "finished"  # confirmed before the answer


def test_an_orphaned_sandbox_is_removed_by_the_reconciler(stack: RunningStack, modal_fake: FakeModal) -> None:
    import modal

    client = modal.Client(modal_fake.url, 1, modal_fake.token)  # CLIENT_TYPE_CLIENT
    client.__enter__()
    app = modal.App.lookup("stack-workers", create_if_missing=True, client=client)
    tags = {"openalice_scheduler": "managed", "openalice_lease_id": "no-such-lease", "openalice_created": "0"}
    orphan = modal.Sandbox.create(
        app=app, image=modal.Image.from_registry(RENDERER), gpu="H100", tags=tags, client=client
    ).object_id

    wait_for(lambda: modal_fake.sandbox(orphan)["status"] == "finished", timeout=30, what="the orphan's removal")


def test_a_modal_lease_is_not_renewed_past_its_sandboxs_timeout(stack: RunningStack, modal_fake: FakeModal) -> None:
    lease = stack.acquire(gpu="high", owner_id="render-farm", ttl_seconds=900).json()["lease"]
    renew = f"/v1/lease/{lease['lease_id']}/renew"

    refused = stack.request("POST", renew, owner="render-farm", json={"ttl_seconds": 1300})

    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict", refused.text
    ends = datetime.fromisoformat(refused.json()["error"]["details"]["worker_ends_at"]).timestamp()
    sandbox = modal_fake.sandbox(lease["provider_token"])
    assert sandbox["created_at"] + sandbox["timeout_secs"] >= ends  # Modal ends it no sooner than that
    within = stack.request("POST", renew, owner="render-farm", json={"ttl_seconds": 1000})
    assert within.status_code == 200, within.text
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="render-farm")
