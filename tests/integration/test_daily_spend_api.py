"""The daily spend limit through `make run`: leases bill until the sweep has confirmed their release, and the
limit holds on what the usage report says they billed (the issue's five 1-second leases at 36 USD/h
against 0.05 USD a day, with the sweep every second)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.lifecycle import ENDED
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

ENDED_STATUSES = {status.value for status in ENDED}


@pytest.fixture(scope="module")
def stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("daily-spend"),
        docker_env=docker_host.env(),
        extra_env={
            "MAX_SPEND_PER_OWNER_PER_DAY": "0.05",
            "LOCAL_DOCKER_COST_PER_HOUR": "36",  # 0.01 USD a second
            "SWEEP_INTERVAL_SECONDS": "1",
            "RELEASE_ALLOWANCE_SECONDS": "1",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def test_one_second_leases_never_bill_past_the_daily_limit(stack: RunningStack) -> None:
    answers = [stack.acquire(owner_id="spender", ttl_seconds=1) for _ in range(5)]
    granted = [answer.json()["lease"]["lease_id"] for answer in answers if answer.status_code == 201]

    def all_ended() -> bool:
        return all(
            stack.request("GET", f"/v1/lease/{lease_id}").json()["lease"]["status"] in ENDED_STATUSES
            for lease_id in granted
        )

    wait_for(all_ended, timeout=30, what="every granted lease released by the sweep")
    (row,) = stack.request("GET", "/v1/usage", params={"owner_id": "spender"}).json()["usage"]
    env = stack.functions_env()
    day = stack.request("GET", "/v1/usage").json()["since"]
    counter = stack.dynamodb().get_item(
        TableName=env["COUNTERS_TABLE"], Key={"counter": {"S": f"spend#{day}#spender"}}, ConsistentRead=True
    )["Item"]

    print(f"\n{len(granted)} of 5 granted, billed {row['cost_usd']} USD in {row['lease_seconds']} s")
    assert [answer.status_code for answer in answers].count(429) == 5 - len(granted) >= 1
    assert row["leases"] == len(granted) and row["cost_usd"] <= 0.05
    assert int(counter["leases"]["N"]) == round(row["cost_usd"] * 1_000_000)  # the counter is what was billed
