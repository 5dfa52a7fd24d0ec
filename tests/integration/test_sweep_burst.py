"""A burst of expiries on a slow engine, end to end with `make run`'s stack: the sweep keeps up.

40 leases expire together on a Docker engine whose DELETE takes 0.5 s (a TLS proxy in front of the
test engine adds the delay). Released one after another that is over 20 s; the sweep releases them
side by side (the proxy counts the DELETEs in flight at once), so all are gone well before that. How
soon on a quiet machine (6.5 s after the last expiry with a 5-s sweep) is bench/sweep_burst.py's to
measure: on a loaded 2-vCPU machine the same run took 9.7 to 12.9 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.support.engine29_proxy import Engine29Proxy
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

LEASES = 40
DELETE_SECONDS = 0.5
SWEEP_INTERVAL_SECONDS = 5.0
ONE_BY_ONE_SECONDS = LEASES * DELETE_SECONDS
SIDE_BY_SIDE = 4  # DELETEs in flight at once, at least (SWEEP_CONCURRENCY is 32)
LEASE_LABEL = "openalice.scheduler/lease-id"


@pytest.fixture(scope="module")
def slow_engine(docker_host: Any) -> Iterator[Engine29Proxy]:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path), delays={"DELETE": DELETE_SECONDS}).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def burst_stack(slow_engine: Engine29Proxy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("burst"),
        docker_env=slow_engine.env(),
        extra_env={"SWEEP_INTERVAL_SECONDS": str(SWEEP_INTERVAL_SECONDS), "RECONCILE_INTERVAL_SECONDS": "3600"},
    )
    yield running
    running.stop()


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.mark.slow
def test_forty_leases_expiring_together_on_a_slow_engine_are_released_side_by_side_and_gone_before_one_by_one_would(
    burst_stack: RunningStack, slow_engine: Engine29Proxy, docker_client: Any
) -> None:
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: burst_stack.acquire(ttl_seconds=600, owner_id="batch"), range(LEASES)))
        assert [answer.status_code for answer in answers] == [201] * LEASES, [a.text for a in answers]
        ids = {answer.json()["lease"]["lease_id"] for answer in answers}
        # Then renewed to a short TTL together (renew is quick; acquires on a busy machine are not),
        # so that they expire within a second or two of each other, as a batch job ending does.
        renewed = list(
            pool.map(
                lambda lease_id: burst_stack.request(
                    "POST", f"/v1/lease/{lease_id}/renew", owner="batch", json={"ttl_seconds": 4}
                ),
                ids,
            )
        )
    assert [answer.status_code for answer in renewed] == [200] * LEASES, [a.text for a in renewed]
    expiries = [_epoch(answer.json()["lease"]["expires_at"]) for answer in renewed]
    last_expiry = max(expiries)

    def ours_left() -> set[str]:
        containers = docker_client.api.containers(all=True, filters={"label": LEASE_LABEL})  # one listing, no inspects
        return {container["Labels"][LEASE_LABEL] for container in containers} & ids

    assert len(ours_left()) == LEASES
    wait_for(lambda: not ours_left(), timeout=60 + SWEEP_INTERVAL_SECONDS, interval=0.2, what="every container removed")
    gone_after = time.time() - last_expiry

    deletes = sum(1 for request in slow_engine.requests_seen if request.startswith("DELETE "))
    spread = last_expiry - min(expiries)
    print(f"\n{LEASES} leases expiring within {spread:.1f} s, DELETE {DELETE_SECONDS} s, sweep every")
    print(f"{SWEEP_INTERVAL_SECONDS:g} s: all gone {gone_after:.1f} s after the last expiry")
    print(f"DELETEs in flight at once, at most: {slow_engine.most_in_flight.get('DELETE', 0)}")
    assert deletes >= LEASES
    assert slow_engine.most_in_flight["DELETE"] >= SIDE_BY_SIDE
    assert gone_after < SWEEP_INTERVAL_SECONDS + ONE_BY_ONE_SECONDS / 2
    statuses = {burst_stack.request("GET", f"/v1/lease/{lease_id}").json()["lease"]["status"] for lease_id in ids}
    assert statuses == {"expired"}


@pytest.fixture(scope="module")
def small_batch_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("handoff"),
        docker_env=docker_host.env(),
        extra_env={"SWEEP_INTERVAL_SECONDS": "3600", "RECONCILE_INTERVAL_SECONDS": "3600", "SWEEP_BATCH_SIZE": "4"},
    )
    yield running
    running.stop()


@pytest.mark.slow
def test_a_sweep_with_more_due_than_its_batch_hands_the_rest_on_through_the_lambda_api(
    small_batch_stack: RunningStack, docker_client: Any
) -> None:
    answers = [small_batch_stack.acquire(ttl_seconds=2, owner_id="batch") for _ in range(10)]
    ids = {answer.json()["lease"]["lease_id"] for answer in answers}
    time.sleep(2.5)  # all due now; no scheduled sweep will come (interval 3600 s)

    env = small_batch_stack.functions_env()
    client = boto3.client(
        "lambda",
        endpoint_url=env["AWS_ENDPOINT_URL_LAMBDA"],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    # What the schedule would send, through the same Lambda Invoke API the hand-offs use.
    client.invoke(FunctionName="SweepExpiredFunction", InvocationType="Event", Payload=b'{"source": "aws.events"}')

    def ours_left() -> set[str]:
        containers = docker_client.api.containers(all=True, filters={"label": LEASE_LABEL})
        return {container["Labels"][LEASE_LABEL] for container in containers} & ids

    wait_for(lambda: not ours_left(), timeout=60, what="every container removed by the chain of sweeps")
    assert small_batch_stack.logs().count("handed the rest on") >= 2  # 10 due, 4 per invocation
