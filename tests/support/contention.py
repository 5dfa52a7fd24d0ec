"""The contention scenario: N concurrent acquires against a provider cap on a running local stack, then
an audit: exactly `cap` granted and every other one 503 `no_capacity`, the provider counter exact while
held, nothing left and every counter 0 after release. Run by tests/integration/test_contention_api.py
and, at full size with its report, by bench/contention.py."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from bench.dockerstack import DockerTarget, api_session, live_leases


@dataclass
class Burst:
    """What N concurrent acquires got back."""

    answers: Counter[str] = field(default_factory=Counter)
    granted: list[str] = field(default_factory=list)
    seconds: float = 0.0


def burst(url: str, secret: str, acquires: int, timeout: float = 120.0) -> Burst:
    """Fire `acquires` POST /v1/lease at once (threads released together by a barrier)."""
    result = Burst()
    lock = threading.Lock()
    start = threading.Barrier(acquires)

    def one() -> None:
        with api_session(secret) as session:
            start.wait()
            try:
                response = session.post(
                    url + "/v1/lease", json={"kind": "renderer", "ttl_seconds": 600}, timeout=timeout
                )
            except requests.RequestException as error:
                with lock:
                    result.answers[f"exception {type(error).__name__}"] += 1
                return
        code = "-"
        if response.status_code != 201:
            try:
                code = response.json()["error"]["code"]
            except (ValueError, KeyError, TypeError):
                code = "no error body"
        with lock:
            result.answers[f"{response.status_code} {code}"] += 1
            if response.status_code == 201:
                result.granted.append(response.json()["lease"]["lease_id"])

    threads = [threading.Thread(target=one, name=f"acquire-{index}") for index in range(acquires)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = round(time.monotonic() - began, 2)
    return result


def counters(stack: Any) -> dict[str, int]:
    """Every counter in the stack's counters table (strongly consistent Scan)."""
    table = stack.functions_env()["COUNTERS_TABLE"]
    items = stack.dynamodb().scan(TableName=table, ConsistentRead=True)["Items"]
    return {item["counter"]["S"]: int(item.get("leases", {}).get("N", "0")) for item in items}


def live_lease_ids(stack: Any) -> list[str]:
    """Every live lease the API lists (all pages)."""
    with api_session(stack.secret) as session:
        return [lease["lease_id"] for lease in live_leases(session, stack.url)]


def managed_containers(docker_env: dict[str, str]) -> set[str]:
    """The lease ids of the managed containers on the stack's Docker host, running or not."""
    return set(DockerTarget(docker_env, {}).managed_containers())


def run(stack: Any, docker_env: dict[str, str], acquires: int, cap: int) -> dict[str, Any]:
    """The burst, the audit, the release and the leak check against a running stack."""
    print(f"[contention] {acquires} concurrent acquires against LOCAL_DOCKER_MAX_LEASES={cap} ...", flush=True)
    before = managed_containers(docker_env)  # a shared Docker host may hold other runs' workers
    outcome = burst(stack.url, stack.secret, acquires)
    print(f"[contention] answers in {outcome.seconds} s: {dict(outcome.answers)}", flush=True)
    live = live_lease_ids(stack)
    during = {
        "counters": counters(stack),
        "live_leases": len(live),
        "containers": len(managed_containers(docker_env) - before),
    }
    releases: Counter[int] = Counter()
    for lease_id in outcome.granted:
        releases[stack.request("DELETE", f"/v1/lease/{lease_id}").status_code] += 1
    after = {
        "counters": counters(stack),
        "live_leases": len(live_lease_ids(stack)),
        "containers": len(managed_containers(docker_env) - before),
    }
    granted = len(outcome.granted)
    expected = {"201 -": cap, "503 no_capacity": acquires - cap}
    checks = {
        "exactly_cap_granted": granted == cap,
        "rest_refused_503_no_capacity": dict(outcome.answers) == {k: v for k, v in expected.items() if v},
        "no_5xx_but_no_capacity": all(not key.startswith("5") or key == "503 no_capacity" for key in outcome.answers),
        "counter_exact_while_held": during["counters"].get("provider#local-docker", 0) == during["live_leases"] == cap,
        "one_worker_per_granted_lease": during["containers"] == cap,
        "every_release_204": dict(releases) == ({204: cap} if cap else {}),
        "no_leak_after_release": after["live_leases"] == 0 and after["containers"] == 0,
        "every_counter_zero_after_release": all(value == 0 for value in after["counters"].values()),
    }
    return {
        "benchmark": "contention",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "acquires": acquires,
        "cap": cap,
        "seconds": outcome.seconds,
        "answers": dict(outcome.answers),
        "granted": granted,
        "refused_no_capacity": outcome.answers.get("503 no_capacity", 0),
        "server_errors": sum(count for key, count in outcome.answers.items() if key.startswith("5"))
        - outcome.answers.get("503 no_capacity", 0),
        "while_held": during,
        "releases": {str(status): count for status, count in releases.items()},
        "after_release": after,
        "checks": checks,
        "ok": all(checks.values()),
    }
