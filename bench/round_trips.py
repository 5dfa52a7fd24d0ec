"""DynamoDB round trips per operation, counted exactly (botocore `before-call` events, not timing).

The real handlers run in-process (their module init included) against the embedded DynamoDB
with the tables of template.yaml; the provider is an in-memory fake behind the production
InstrumentedProvider, so every DynamoDB request the service makes is one the count sees.
Counted per operation: round trips by DynamoDB operation and table, and the item writes inside
transactions. Writes bench/results/round_trips.json.

    .venv/bin/python bench/round_trips.py
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, quiet_stdout, write_result  # noqa: E402
from bench.handlers import ApiCalls, DynamoDB, Handlers, lease_body, load_event  # noqa: E402

# The limits: lease-store round trips per operation (the idempotency record is counted apart).
LIMITS = {"acquire": 2, "release": 2, "get": 1, "renew": 1}


def measure(handlers: Handlers, *, list_pages: int = 3) -> dict[str, Any]:
    """Run each operation once through its handler and count its DynamoDB requests."""
    calls = handlers.calls
    results: dict[str, Any] = {}

    def count(name: str, action: Any) -> Any:
        with calls.recording() as recorded:
            outcome = action()
        results[name] = ApiCalls.tally(recorded)
        return outcome

    count("health", lambda: handlers.invoke("health", load_event("health")))
    count("authorizer", lambda: handlers.invoke("authorizer", load_event("authorizer")))
    lease = count("acquire", lambda: handlers.acquire(lease_body()))
    key = f"bench-{uuid.uuid4().hex}"
    count("acquire with Idempotency-Key", lambda: handlers.acquire(lease_body(), idempotency_key=key))
    count("acquire replayed (same key)", lambda: handlers.acquire(lease_body(), idempotency_key=key))
    count("get", lambda: handlers.get(lease["lease_id"]))
    count("renew", lambda: handlers.renew(lease["lease_id"]))
    count("release", lambda: handlers.release(lease["lease_id"]))

    # list: `list_pages` full pages of live leases of one owner, then count Queries per page.
    owner = f"pager-{uuid.uuid4().hex[:6]}"
    per_page = 2
    for _ in range(per_page * list_pages - 1):
        handlers.acquire(lease_body(owner=owner))
    pages, queries, listed = 0, 0, 0
    token: str | None = None
    with calls.recording() as recorded:
        while True:
            query = {"owner_id": owner, "limit": str(per_page), **({"next_token": token} if token else {})}
            page = handlers.list_page(**query)
            pages += 1
            listed += len(page["leases"])
            token = page["next_token"]
            if not token:
                break
    queries = sum(1 for call in recorded if call.operation == "Query")
    results["list (per page)"] = {
        **ApiCalls.tally(recorded),
        "pages": pages,
        "leases_listed": listed,
        "queries": queries,
        "queries_per_page": round(queries / pages, 3),
    }

    # sweep: one expired lease among the live ones (informative: not one of the limits).
    expired = handlers.acquire(lease_body(owner=f"sweep-{uuid.uuid4().hex[:6]}", ttl_seconds=1))
    time.sleep(max(0.0, 2.05 - (time.time() % 1)))  # past its whole-second expiry
    with calls.recording() as recorded:
        report = handlers.invoke("sweep_expired", load_event("sweep_expired"))
    results["sweep (1 expired lease)"] = {**ApiCalls.tally(recorded), "handler_result": report}
    assert handlers.get(expired["lease_id"])["status"] == "expired"
    return results


LIMIT_CONFIGURATIONS = {
    "LOCAL_DOCKER_MAX_LEASES=100": {"LOCAL_DOCKER_MAX_LEASES": "100"},
    "LOCAL_DOCKER_MAX_LEASES=100, MAX_LEASES_PER_OWNER=10": {
        "LOCAL_DOCKER_MAX_LEASES": "100",
        "MAX_LEASES_PER_OWNER": "10",
    },
}


def targets(results: dict[str, Any], limited: dict[str, dict[str, Any]] | None = None) -> list[Target]:
    listed = results["list (per page)"]
    found = [
        Target(
            "acquire: lease-store write round trips",
            results["acquire"]["lease_store_write_round_trips"],
            LIMITS["acquire"],
            note="PutItem (pending) + UpdateItem (activate)",
        ),
        Target("acquire: reads", results["acquire"]["read_round_trips"], 0),
        Target(
            "acquire with Idempotency-Key: lease-store write round trips",
            results["acquire with Idempotency-Key"]["lease_store_write_round_trips"],
            LIMITS["acquire"],
        ),
        Target(
            "acquire with Idempotency-Key: idempotency-record round trips",
            results["acquire with Idempotency-Key"]["idempotency_round_trips"],
            2,
            note="powertools: PutItem (INPROGRESS) + UpdateItem (COMPLETED) of the one record",
        ),
        Target("release: round trips", results["release"]["round_trips"], LIMITS["release"]),
        Target("get: round trips", results["get"]["round_trips"], LIMITS["get"]),
        Target("renew: round trips", results["renew"]["round_trips"], LIMITS["renew"]),
        Target("list: Query round trips per page", listed["queries_per_page"], 1),
        Target("list: other round trips", listed["round_trips"] - listed["queries"], 0),
    ]
    for name, tallies in (limited or {}).items():
        found.append(Target(f"[{name}] acquire: round trips", tallies["acquire"]["round_trips"], LIMITS["acquire"]))
        found.append(Target(f"[{name}] release: round trips", tallies["release"]["round_trips"], LIMITS["release"]))
    return found


def measure_with_limits(database: DynamoDB) -> dict[str, dict[str, Any]]:
    """acquire and release with caps and quotas: the counters join one transaction, no round trip is added."""
    found: dict[str, dict[str, Any]] = {}
    for name, env in LIMIT_CONFIGURATIONS.items():
        with Handlers(database, extra_env=env, names=("acquire_lease", "release_lease")) as handlers:
            results: dict[str, Any] = {}
            with handlers.calls.recording() as recorded:
                lease = handlers.acquire(lease_body())
            results["acquire"] = ApiCalls.tally(recorded)
            with handlers.calls.recording() as recorded:
                handlers.release(lease["lease_id"])
            results["release"] = ApiCalls.tally(recorded)
            found[name] = results
    return found


def print_table(results: dict[str, Any], title: str) -> None:
    print(title)
    print(f"  {'operation':<34}{'trips':>6}{'writes':>7}{'items':>7}{'reads':>6}  by operation:table")
    for name, tally in results.items():
        detail = ", ".join(f"{key} ×{value}" for key, value in tally["by_operation_and_table"].items()) or "none"
        print(
            f"  {name:<34}{tally['round_trips']:>6}{tally['write_round_trips']:>7}{tally['item_writes']:>7}"
            f"{tally['read_round_trips']:>6}  {detail}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="results file (default bench/results/round_trips.json)")
    parser.add_argument("--list-pages", type=int, default=3)
    args = parser.parse_args(argv)
    database = DynamoDB()
    try:
        with quiet_stdout(), Handlers(database) as handlers:
            results = measure(handlers, list_pages=args.list_pages)
        with quiet_stdout():
            limited = measure_with_limits(database)
    finally:
        database.stop()
    found = targets(results, limited)
    print_table(results, "DynamoDB round trips per operation (default configuration: no caps, no quota)")
    for name, tallies in limited.items():
        print_table(tallies, f"With {name} (the counters join one transaction)")
    print_targets(found)
    result = {
        **envelope("round_trips", {"list_pages": args.list_pages, "provider": "in-memory fake (InstrumentedProvider)"}),
        "method": "botocore before-call.dynamodb.* events on every handler's client: exact request counts",
        "operations": results,
        "with_limits": limited,
        "targets": [target.as_dict() for target in found],
    }
    path = write_result("round_trips", result, args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
