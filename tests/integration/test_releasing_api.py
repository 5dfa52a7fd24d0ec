"""A lease whose worker cannot be removed (its Docker engine hangs) through `make run`: DELETE answers 502 and
the lease stays `releasing` — listed, named by a bulk release, shown by `leasectl list` — until the sweep
removes the worker once the engine answers again.

The engine is the test engine behind a TLS proxy that can be frozen (it completes the TLS handshake, reads each
request and never answers). A release claim goes stale after RELEASE_CLAIM_SECONDS, and only then may the
sweep (every SWEEP_INTERVAL_SECONDS) take the release over.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine29_proxy import Engine29Proxy
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

LEASE_LABEL = "openalice.scheduler/lease-id"
OWNER = "hung-engine"
CLAIM_SECONDS = 35  # longer than a DELETE may run (API Gateway: 30 s), as the default 120 s is
CLIENT_SRC = Path(__file__).resolve().parents[2] / "client" / "src"


@pytest.fixture(scope="module")
def freezable(docker_host: Any) -> Iterator[Engine29Proxy]:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path)).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def releasing_stack(freezable: Engine29Proxy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("releasing"),
        docker_env=freezable.env(),
        extra_env={
            "SWEEP_INTERVAL_SECONDS": "2",
            "RECONCILE_INTERVAL_SECONDS": "3600",
            "RELEASE_CLAIM_SECONDS": str(CLAIM_SECONDS),
        },
    )
    yield running
    running.stop()


def _containers(client: Any, lease_id: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"}))


def _leasectl(stack: RunningStack, *argv: str) -> tuple[int, str]:
    """`leasectl` as a process, the client package from the tree (not installed)."""
    env = {key: value for key, value in os.environ.items() if key not in ("SCHEDULER_URL", "INTERNAL_SECRET")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(CLIENT_SRC), env.get("PYTHONPATH", "")]),
        SCHEDULER_URL=stack.url,
        INTERNAL_SECRET=stack.secret,
        NO_COLOR="1",
    )
    command = [sys.executable, "-m", "openalice_scheduler_client.cli", *argv]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout


@pytest.mark.slow
def test_a_lease_whose_engine_hangs_stays_listed_releasing_until_the_sweep_removes_its_worker(
    releasing_stack: RunningStack, freezable: Engine29Proxy, docker_client: Any
) -> None:
    acquired = releasing_stack.acquire(owner_id=OWNER, ttl_seconds=600)
    assert acquired.status_code == 201, acquired.text
    lease_id = acquired.json()["lease"]["lease_id"]
    assert len(_containers(docker_client, lease_id)) == 1

    freezable.mute = True  # the engine now hangs: nothing it is asked gets an answer
    try:
        started = time.monotonic()
        deleted = releasing_stack.request("DELETE", f"/v1/lease/{lease_id}", owner=OWNER)
        print(f"\nDELETE on a hung engine: {deleted.status_code} after {time.monotonic() - started:.1f} s")
        assert deleted.status_code == 502, deleted.text

        listed = releasing_stack.request("GET", f"/v1/leases?owner_id={OWNER}").json()["leases"]
        assert [(lease["lease_id"], lease["status"]) for lease in listed] == [(lease_id, "releasing")]

        bulk = releasing_stack.request("DELETE", f"/v1/leases?owner_id={OWNER}", owner=OWNER).json()
        assert bulk["released"] == []
        assert [(item["lease_id"], item["status"], item["code"]) for item in bulk["not_released"]] == [
            (lease_id, "releasing", "provider_error")
        ]

        code, table = _leasectl(releasing_stack, "list", "--owner", OWNER)
        print(table)
        (row,) = table.splitlines()[1:]
        assert code == 0 and row.split()[0] == lease_id and "releasing" in row.split()
        assert len(_containers(docker_client, lease_id)) == 1  # still there, still billing: as listed
    finally:
        freezable.mute = False

    # The engine answers again: once the claim is stale the sweep takes the release over and finishes it.
    started = time.monotonic()
    wait_for(
        lambda: releasing_stack.lease_store().get(lease_id).status.value == "released",
        timeout=CLAIM_SECONDS + 60,
        what="the sweep to release the lease",
    )
    print(f"released by the sweep {time.monotonic() - started:.1f} s after the engine came back")
    assert _containers(docker_client, lease_id) == []
    assert releasing_stack.request("GET", f"/v1/leases?owner_id={OWNER}").json()["leases"] == []
