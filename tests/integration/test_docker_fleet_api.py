"""A fleet of two TLS Docker engines behind `make run` (DOCKER_HOSTS): 2 + 2 leases, a fifth refused, and a
hung host passed over while the other serves.

Host "b" is the docs-style engine reached through a TLS proxy that can be frozen (it then completes
the TLS handshake, reads each request and never answers); host "a" is the test engine, direct. Both
have max_leases 2. "b" comes first in DOCKER_HOSTS, so on a tie it is tried first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine29_proxy import Engine29Proxy
from tests.support.stack import RunningStack, start_stack

LEASE_LABEL = "openalice.scheduler/lease-id"


@pytest.fixture(scope="module")
def frozen_b(docs_style_host: Any) -> Iterator[Engine29Proxy]:
    proxy = Engine29Proxy(docs_style_host.host, Path(docs_style_host.cert_path)).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def fleet_stack(
    docker_host: Any, frozen_b: Engine29Proxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    hosts = [
        {"name": "b", "host": frozen_b.host, "cert_path": str(frozen_b.cert_path), "max_leases": 2},
        {"name": "a", "host": docker_host.host, "cert_path": str(docker_host.cert_path), "max_leases": 2},
    ]
    running = start_stack(
        tmp_path_factory.mktemp("fleet"),
        docker_env={"DOCKER_HOSTS": json.dumps(hosts)},
        extra_env={"SWEEP_INTERVAL_SECONDS": "3600", "RECONCILE_INTERVAL_SECONDS": "3600"},
    )
    yield running
    running.stop()


def _host(lease: dict[str, Any]) -> str:
    return str(lease["provider_token"]).split("/", 1)[0]


def _containers(client: Any, lease_id: str) -> list[Any]:
    return list(client.api.containers(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"}))


@pytest.mark.slow
def test_two_engines_take_two_leases_each_refuse_a_fifth_and_serve_while_one_hangs(
    fleet_stack: RunningStack, frozen_b: Engine29Proxy, docker_client: Any, docs_style_host: Any
) -> None:
    b_client = docs_style_host.client()
    acquired = [fleet_stack.acquire(owner_id="fleet") for _ in range(4)]
    assert [answer.status_code for answer in acquired] == [201] * 4, [answer.text for answer in acquired]
    leases = [answer.json()["lease"] for answer in acquired]
    assert sorted(_host(lease) for lease in leases) == ["a", "a", "b", "b"]
    for lease in leases:  # each worker really is on the host its lease records
        client = docker_client if _host(lease) == "a" else b_client
        assert len(_containers(client, lease["lease_id"])) == 1

    fifth = fleet_stack.acquire(owner_id="fleet")
    assert fifth.status_code == 503, fifth.text
    print(f"\nfifth acquire: {fifth.status_code} {fifth.json()['error']['message']}")

    for lease in leases:
        answer = fleet_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="fleet")
        assert answer.status_code == 204, answer.text
        client = docker_client if _host(lease) == "a" else b_client
        assert _containers(client, lease["lease_id"]) == []

    frozen_b.mute = True  # host b now hangs: TLS handshake done, requests never answered
    timings = []
    served = []
    for _ in range(2):
        started = time.monotonic()
        answer = fleet_stack.acquire(owner_id="fleet")
        timings.append(time.monotonic() - started)
        assert answer.status_code == 201, answer.text
        served.append(answer.json()["lease"])
    print(
        f"while b hangs: acquires served by {[_host(lease) for lease in served]} in {[round(t, 1) for t in timings]} s"
    )
    assert [_host(lease) for lease in served] == ["a", "a"]
    assert timings[0] < 20  # one short attempt on b, then a, within the acquire budget
    assert timings[1] < 5  # b remembered as down: not tried again
    for lease in served:
        assert fleet_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="fleet").status_code == 204
    b_client.close()
