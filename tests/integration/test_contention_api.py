"""200 concurrent acquires against a cap of 10, DynamoDB answering conflicts and throttling (DYNAMODB_FAULTS):
exactly 10 granted, the rest 503 no_capacity, no other 5xx, counters exact, nothing leaked
(tests/support/contention.py; bench/contention.py runs it at full size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.contention import run
from tests.support.stack import start_stack


def test_two_hundred_concurrent_acquires_against_a_cap_of_ten_through_the_api(docker_host: Any, tmp_path: Path) -> None:
    stack = start_stack(
        tmp_path,
        docker_env=docker_host.env(),
        extra_env={
            "LOCAL_DOCKER_MAX_LEASES": "10",
            "DYNAMODB_FAULTS": "conflict=0.1,throttle=0.05",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
        timeout=120.0,
    )
    try:
        result = run(stack, docker_host.env(), acquires=200, cap=10)
    finally:
        stack.stop()
    assert result["answers"] == {"201 -": 10, "503 no_capacity": 190}, result
    assert result["checks"] == dict.fromkeys(result["checks"], True), result
    assert "DynamoDB faults injected" in stack.logs()
