"""Long lines through `GET /v1/lease/{id}/logs` on the local stack (a real TLS engine): a worker's 3 MB line
without a newline answers its last mebibyte, 30 MB answer within API Gateway's time, and a 40 KiB line with
carriage returns comes back as written."""

from __future__ import annotations

import time
from typing import Any

from tests.support.stack import RunningStack

OWNER = "long-logs"


def _lease(stack: RunningStack) -> dict[str, Any]:
    response = stack.acquire(owner_id=OWNER, ttl_seconds=600)
    assert response.status_code == 201, response.text
    return dict(response.json()["lease"])


def _print(docker_client: Any, lease: dict[str, Any], script: str) -> None:
    """What the worker's main process prints (its stdout is what the engine logs)."""
    container = docker_client.containers.get(str(lease["provider_token"]))
    assert container.exec_run(["sh", "-c", f"({script}) > /proc/1/fd/1"]).exit_code == 0


def _logs(stack: RunningStack, lease: dict[str, Any], **params: str) -> Any:
    return stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner=OWNER, params=params)


def test_a_3_mb_line_without_a_newline_answers_its_last_mebibyte_marked_truncated(
    stack: RunningStack, docker_client: Any
) -> None:
    lease = _lease(stack)
    # The engine holds back the last piece (under 16 KiB) of a line still open while the worker runs.
    _print(docker_client, lease, "head -c 3000000 /dev/zero | tr '\\0' x")

    answer = _logs(stack, lease)

    assert answer.status_code == 200, answer.text[:500]
    assert answer.headers["X-Logs-Truncated"] == "true" and answer.headers["X-Log-Lines"] == "1"
    assert set(answer.text) == {"x", "\n"} and len(answer.text) > 1_000_000
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner=OWNER)


def test_30_mb_with_tail_5000_answer_well_within_api_gateways_time(stack: RunningStack, docker_client: Any) -> None:
    lease = _lease(stack)
    _print(docker_client, lease, "head -c 30000000 /dev/zero | tr '\\0' y; echo; echo last")

    started = time.monotonic()
    answer = _logs(stack, lease, tail="5000")
    took = time.monotonic() - started

    print(f"\n30 MB, tail=5000 through the API: {answer.status_code} in {took:.2f} s, {len(answer.text)} characters")
    assert answer.status_code == 200 and answer.headers["X-Logs-Truncated"] == "true"
    assert answer.text.endswith("yyy\nlast\n") and len(answer.text) > 1_000_000
    assert took < 10
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner=OWNER)


def test_a_40_kib_line_with_carriage_returns_comes_back_as_written(stack: RunningStack, docker_client: Any) -> None:
    lease = _lease(stack)
    _print(
        docker_client,
        lease,
        "head -c 20000 /dev/zero | tr '\\0' a; printf 'progress 50%%\\r'; head -c 20000 /dev/zero | tr '\\0' b; echo",
    )

    answer = _logs(stack, lease, tail="1")

    assert answer.status_code == 200 and "X-Logs-Truncated" not in answer.headers
    assert answer.text == "a" * 20000 + "progress 50%\r" + "b" * 20000 + "\n"
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner=OWNER)
