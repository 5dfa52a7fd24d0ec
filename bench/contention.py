"""Contention: N concurrent acquires against a provider cap, with DynamoDB answering conflicts and throttling.

Starts the local stack with `LOCAL_DOCKER_MAX_LEASES=<cap>` and `DYNAMODB_FAULTS` (default
`conflict=0.1,throttle=0.05`: the embedded DynamoDB answers that share of requests with
TransactionConflict / TransactionConflictException / ProvisionedThroughputExceededException /
ThrottlingException, as DynamoDB does under contention), fires N acquires at once, then checks:

- exactly `cap` granted (201), every other one refused with 503 `no_capacity`, no other answer;
- the provider counter reads exactly the number of live leases, before and after releasing them;
- after releasing every granted lease: no managed container, no live lease, every counter 0.

Results go to bench/results/contention.json and contention.md. Exit status 0 only when all hold.

    .venv/bin/python bench/contention.py                       # 200 acquires, cap 10, faults on
    .venv/bin/python bench/contention.py --acquires 50 --cap 5 --faults conflict=0.3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RESULTS = REPO / "bench" / "results"
MANAGED_LABEL = "openalice.scheduler/managed"
LEASE_ID_LABEL = "openalice.scheduler/lease-id"


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
        with requests.Session() as session:
            session.trust_env = False  # loopback only, no proxy
            start.wait()
            try:
                response = session.post(
                    url + "/v1/lease",
                    json={"kind": "renderer", "ttl_seconds": 600},
                    headers={"X-Internal-Secret": secret},
                    timeout=timeout,
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
    ids: list[str] = []
    params: dict[str, str] = {"limit": "1000"}
    while True:
        body = stack.request("GET", "/v1/leases", params=params).json()
        ids += [lease["lease_id"] for lease in body["leases"]]
        if not body["next_token"]:
            return ids
        params["next_token"] = body["next_token"]


def managed_containers(docker_env: dict[str, str]) -> set[str]:
    """The lease ids of the managed containers on the stack's Docker host, running or not."""
    import docker

    client = docker.DockerClient(**docker.utils.kwargs_from_env(environment=docker_env), version="1.41", timeout=60)
    client.api.trust_env = False
    try:
        listed = client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=true"})
        return {container.labels.get(LEASE_ID_LABEL, container.id) for container in listed}
    finally:
        client.close()


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


def markdown(result: dict[str, Any], faults: str) -> str:
    """The figures as a short Markdown report."""
    held = result["while_held"]["counters"]
    lines = [
        "# Contention: concurrent acquires against a provider cap, DynamoDB faults on",
        "",
        f"{result['date']} · {result['acquires']} concurrent acquires · `LOCAL_DOCKER_MAX_LEASES={result['cap']}`"
        f" · `DYNAMODB_FAULTS={faults}` · {result['seconds']} s",
        "",
        "| figure | value |",
        "| --- | ---: |",
        f"| granted (201) | {result['granted']} |",
        f"| refused 503 `no_capacity` | {result['refused_no_capacity']} |",
        f"| other 5xx | {result['server_errors']} |",
        f"| faults injected by the embedded DynamoDB | {result.get('faults_injected', '–')} |",
        f"| conflicts between the acquires themselves | {result.get('natural_conflicts', '–')} |",
        f"| provider counter while held / live leases | {held.get('provider#local-docker', 0)}"
        f" / {result['while_held']['live_leases']} |",
        f"| after release: live leases / managed containers | {result['after_release']['live_leases']}"
        f" / {result['after_release']['containers']} |",
        f"| after release: counters | {json.dumps(result['after_release']['counters'])} |",
        "",
        "| check | holds |",
        "| --- | --- |",
        *[f"| {name} | {'yes' if held else '**no**'} |" for name, held in result["checks"].items()],
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Start a stack with the cap and the faults, run, write the results; 0 only if every check holds."""
    parser = argparse.ArgumentParser(prog="bench/contention.py", description=__doc__)
    parser.add_argument("--acquires", type=int, default=200)
    parser.add_argument("--cap", type=int, default=10)
    parser.add_argument("--faults", default="conflict=0.1,throttle=0.05", help="DYNAMODB_FAULTS for the stack")
    parser.add_argument("--json", type=Path, default=RESULTS / "contention.json")
    parser.add_argument("--markdown", type=Path, default=RESULTS / "contention.md")
    args = parser.parse_args(argv)
    if args.acquires < 1 or not 0 <= args.cap <= args.acquires:
        parser.error("--acquires must be ≥ 1 and --cap between 0 and --acquires")

    from devstack.docker_host import ensure_worker_images, start_tls_docker_host
    from tests.support.stack import start_stack

    state = Path(tempfile.mkdtemp(prefix="openalice-contention-"))
    (state / "stack").mkdir()
    host = start_tls_docker_host(state / "docker")
    try:
        client = host.client()
        ensure_worker_images(client)
        client.close()
        stack = start_stack(
            state / "stack",
            docker_env=host.env(),
            extra_env={
                "LOCAL_DOCKER_MAX_LEASES": str(args.cap),
                "DYNAMODB_FAULTS": args.faults,
                "RECONCILE_INTERVAL_SECONDS": "3600",
            },
            timeout=120.0,
        )
        try:
            result = run(stack, host.env(), args.acquires, args.cap)
        finally:
            stack.stop()
        result["faults_injected"] = _injected_from_log(stack.logs())
        result["natural_conflicts"] = _natural_conflicts_from_log(stack.logs())
    finally:
        host.stop()
    result["faults"] = args.faults
    for path, text in (
        (args.json, json.dumps(result, indent=2) + "\n"),
        (args.markdown, markdown(result, args.faults)),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(markdown(result, args.faults))
    return 0 if result["ok"] else 1


def _injected_from_log(log: str) -> str | None:
    lines = [line for line in log.splitlines() if "DynamoDB faults injected" in line]
    return lines[-1].split("injected: ", 1)[-1] if lines else None


def _natural_conflicts_from_log(log: str) -> str | None:
    lines = [line for line in log.splitlines() if "transaction conflicts between clients" in line]
    return lines[-1].split("clients: ", 1)[-1] if lines else None


if __name__ == "__main__":
    sys.exit(main())
