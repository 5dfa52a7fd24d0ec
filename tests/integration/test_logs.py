"""Structured logs: every line of a request carries the lease, the caller's ids, the request id and the trace id."""

from __future__ import annotations

import json
from typing import Any

from tests.support.stack import RunningStack
from tests.support.waiting import wait_for


def _lines_of(stack: RunningStack, function: str, request_id: str) -> list[dict[str, Any]]:
    lines = []
    for line in stack.logs().splitlines():
        prefix, _, payload = line.partition("] ")
        if prefix == f"[{function}" and payload.startswith("{") and '"level"' in payload:
            record = json.loads(payload)
            if record.get("function_request_id") == request_id:
                lines.append(record)
    return lines


def test_every_acquire_log_line_carries_lease_owner_correlation_request_and_trace_ids(stack: RunningStack) -> None:
    response = stack.acquire(owner_id="log-owner", correlation_id="job-77")
    request_id = response.headers["apigw-requestid"]
    lease_id = response.json()["lease"]["lease_id"]

    lines = wait_for(lambda: _lines_of(stack, "AcquireLeaseFunction", request_id), timeout=5, what="log lines")

    for record in lines:
        assert record["lease_id"] == lease_id
        assert record["owner_id"] == "log-owner"
        assert record["correlation_id"] == "job-77"
        assert record["request_id"] == request_id
        assert record["xray_trace_id"].startswith("1-")


def test_every_release_log_line_carries_the_lease_and_request_ids(stack: RunningStack) -> None:
    lease = stack.acquire(owner_id="log-owner").json()["lease"]
    response = stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="log-owner")
    request_id = response.headers["apigw-requestid"]

    lines = wait_for(lambda: _lines_of(stack, "ReleaseLeaseFunction", request_id), timeout=5, what="log lines")

    assert all(r["lease_id"] == lease["lease_id"] and r["request_id"] == request_id for r in lines)
    assert all(r["owner_id"] == "log-owner" and "xray_trace_id" in r for r in lines)
