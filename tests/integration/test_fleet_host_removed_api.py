"""A Docker host taken out of DOCKER_HOSTS and put back, on two real TLS engines behind `make run`.

Fleet a+b (a capped at 0, so every lease lands on b), then the stack restarted with a alone: b's leases are
not released on a's word — a DELETE answers 502 and the lease stays `releasing`, an expired one stays
`releasing` through every sweep, the reconciler fails none of them, their logs answer 502, and b's containers
keep running. Restarted with a+b, the sweep releases them and b's containers are gone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

LEASE_LABEL = "openalice.scheduler/lease-id"
OWNER = "fleet-removed"
# Kept across restarts; reconciler and sweep every second, nothing waits for a settling delay.
KEEP = {
    "DEVSTACK_PERSIST": "1",
    "SWEEP_INTERVAL_SECONDS": "1",
    "RECONCILE_INTERVAL_SECONDS": "1",
    "ORPHAN_GRACE_SECONDS": "0",
    "PENDING_DEADLINE_SECONDS": "1",
    "RELEASE_CLAIM_SECONDS": "2",
}


def _host(name: str, engine: Any, cap: int | None = None) -> dict[str, Any]:
    return {"name": name, "host": engine.host, "cert_path": str(engine.cert_path), "max_leases": cap}


def _start(state_dir: Path, *hosts: dict[str, Any]) -> RunningStack:
    fleet = [{key: value for key, value in host.items() if value is not None} for host in hosts]
    return start_stack(state_dir, docker_env={"DOCKER_HOSTS": json.dumps(fleet)}, extra_env=KEEP)


def _running(client: Any, lease_id: str) -> list[str]:
    containers = client.containers.list(filters={"label": f"{LEASE_LABEL}={lease_id}"})
    return [container.status for container in containers]


def _status(stack: RunningStack, lease_id: str) -> str:
    return str(stack.request("GET", f"/v1/lease/{lease_id}").json()["lease"]["status"])


@pytest.mark.slow
def test_leases_on_a_host_removed_from_the_fleet_wait_releasing_until_it_is_back(
    docker_host: Any, docs_style_host: Any, tmp_path: Path
) -> None:
    b_client = docs_style_host.client()
    stack = _start(tmp_path, _host("a", docker_host, cap=0), _host("b", docs_style_host))
    leases: list[dict[str, Any]] = []
    try:
        for ttl in (600, 600, 6):
            answer = stack.acquire(owner_id=OWNER, ttl_seconds=ttl)
            assert answer.status_code == 201, answer.text
            leases.append(answer.json()["lease"])
        assert [lease["provider_token"].split("/")[0] for lease in leases] == ["b", "b", "b"]
        deleted, kept, expiring = (lease["lease_id"] for lease in leases)

        stack.stop()
        stack = _start(tmp_path, _host("a", docker_host, cap=2))

        refused = stack.request("DELETE", f"/v1/lease/{deleted}", owner=OWNER)
        assert refused.status_code == 502, refused.text
        assert "Docker host b is not configured" in refused.json()["error"]["message"]
        print(f"\nDELETE while b is not configured: {refused.status_code} {refused.json()['error']['message']}")
        wait_for(lambda: _status(stack, expiring) == "releasing", timeout=30, what="the expired lease claimed")
        time.sleep(4)  # four more reconcile and sweep passes without b

        assert [_status(stack, lease_id) for lease_id in (deleted, kept, expiring)] == [
            "releasing",
            "active",
            "releasing",
        ]
        logs = stack.request("GET", f"/v1/lease/{kept}/logs", owner=OWNER)
        assert logs.status_code == 502 and "Docker host b" in logs.json()["error"]["message"], logs.text
        assert all(_running(b_client, lease_id) == ["running"] for lease_id in (deleted, kept, expiring))
        assert '"UnconfiguredHostRelease"' in stack.logs()

        stack.stop()
        stack = _start(tmp_path, _host("a", docker_host, cap=0), _host("b", docs_style_host))

        wait_for(
            lambda: [_status(stack, deleted), _status(stack, expiring)] == ["released", "expired"],
            timeout=30,
            what="the sweep to release b's leases",
        )
        assert _running(b_client, deleted) == [] and _running(b_client, expiring) == []
        assert stack.request("DELETE", f"/v1/lease/{kept}", owner=OWNER).status_code == 204
        assert _running(b_client, kept) == []
    finally:
        stack.stop()
        for lease in leases:
            label = f"{LEASE_LABEL}={lease['lease_id']}"
            for container in b_client.containers.list(all=True, filters={"label": label}):
                container.remove(force=True)
        b_client.close()
