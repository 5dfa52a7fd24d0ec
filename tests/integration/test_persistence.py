"""`make run` keeps its data: a lease acquired before a restart reads back `active` after it and keeps its
worker (the reconciler, running every second with no orphan grace, must not take it for an orphan)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import RunningStack, start_stack

LEASE_LABEL = "openalice.scheduler/lease-id"
KEEP = {"DEVSTACK_PERSIST": "1", "RECONCILE_INTERVAL_SECONDS": "1", "ORPHAN_GRACE_SECONDS": "0"}


def containers_of(docker_client: Any, lease_id: str) -> list[Any]:
    return list(docker_client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"}))


def restart(stack: RunningStack, docker_host: Any, **env: str) -> RunningStack:
    stack.stop()
    return start_stack(stack.state_dir, docker_env=docker_host.env(), extra_env={**KEEP, **env})


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path


def test_a_lease_acquired_before_a_restart_is_active_after_it_and_keeps_its_worker(
    docker_host: Any, docker_client: Any, state_dir: Path
) -> None:
    stack = start_stack(state_dir, docker_env=docker_host.env(), extra_env=KEEP)
    try:
        created = stack.acquire(ttl_seconds=600, owner_id="persist")
        assert created.status_code == 201, created.text
        lease = created.json()["lease"]
        stack = restart(stack, docker_host)
        assert "tables restored from" in stack.logs()

        time.sleep(3)  # three reconcile passes on the restarted stack
        after = stack.request("GET", f"/v1/lease/{lease['lease_id']}")

        assert after.status_code == 200, after.text
        assert (after.json()["lease"]["status"], after.json()["lease"]["provider_token"]) == (
            "active",
            lease["provider_token"],
        )
        assert [container.id for container in containers_of(docker_client, lease["lease_id"])] == [
            lease["provider_token"]
        ]
        assert stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="persist").status_code == 204
    finally:
        stack.stop()


def test_fresh_starts_with_empty_tables_and_sets_the_old_ones_aside(
    docker_host: Any, docker_client: Any, state_dir: Path
) -> None:
    stack = start_stack(state_dir, docker_env=docker_host.env(), extra_env=KEEP)
    lease_id = ""
    try:
        created = stack.acquire(ttl_seconds=600)
        lease_id = created.json()["lease"]["lease_id"]
        stack = restart(stack, docker_host, DEVSTACK_FRESH="1")

        assert stack.request("GET", f"/v1/lease/{lease_id}").status_code == 404
        kept = json.loads((state_dir / "dynamodb" / "tables.before-fresh.json").read_text())
        assert any(item.get("lease_id", {}).get("S") == lease_id for items in kept["tables"].values() for item in items)
    finally:
        stack.stop()
        for container in containers_of(docker_client, lease_id):
            container.remove(force=True)
