"""DynamoDB round trips per operation, counted exactly from botocore's events (bench/handlers.py).

The real handlers run in-process with the in-memory provider behind InstrumentedProvider; also with a
provider cap, and with a cap and an owner quota. Writes bench/results/round_trips.json.

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
PENDING_ACTIVE = "PutItem (pending) + UpdateItem (activate)"
# On a capped provider an acquire first reads the queue index (one Query, of the queued leases of at least its
# priority): a freed slot is the queue's before a newcomer's (issue 26). The counters join the same transactions.
CAPPED_READS = {"acquire": 1}
QUEUE_READ_NOTE = "2 writes + 1 Query of the queue index (a freed slot is the queue's first)"


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
    listed, keyed, acquired = results["list (per page)"], results["acquire with Idempotency-Key"], results["acquire"]
    record, writes = "powertools: PutItem (INPROGRESS) + UpdateItem (COMPLETED) of the one record", "write round trips"
    found = [
        Target(f"acquire: lease-store {writes}", acquired["lease_store_write_round_trips"], 2, note=PENDING_ACTIVE),
        Target("acquire: reads", acquired["read_round_trips"], 0),
        Target(f"acquire with Idempotency-Key: lease-store {writes}", keyed["lease_store_write_round_trips"], 2),
        Target(
            "acquire with Idempotency-Key: idempotency-record round trips",
            keyed["idempotency_round_trips"],
            2,
            "",
            note=record,
        ),
    ]
    found += [
        Target(f"{name}: round trips", results[name]["round_trips"], LIMITS[name])
        for name in ("release", "get", "renew")
    ]
    found += [
        Target("list: Query round trips per page", listed["queries_per_page"], 1),
        Target("list: other round trips", listed["round_trips"] - listed["queries"], 0),
    ]
    for name, tallies in (limited or {}).items():
        found += [
            Target(
                f"[{name}] {op}: round trips",
                tallies[op]["round_trips"],
                LIMITS[op] + CAPPED_READS.get(op, 0),
                note=QUEUE_READ_NOTE if op in CAPPED_READS else "",
            )
            for op in LIMITS
            if op in tallies
        ]
    return found


def measure_with_limits(database: DynamoDB) -> dict[str, dict[str, Any]]:
    """acquire and release with caps and quotas: the counters join one transaction, no round trip is added."""
    found: dict[str, dict[str, Any]] = {}
    for name, env in LIMIT_CONFIGURATIONS.items():
        with Handlers(database, extra_env=env, names=("acquire_lease", "release_lease")) as handlers:
            with handlers.calls.recording() as acquired:
                lease = handlers.acquire(lease_body())
            with handlers.calls.recording() as released:
                handlers.release(lease["lease_id"])
            found[name] = {"acquire": ApiCalls.tally(acquired), "release": ApiCalls.tally(released)}
    return found


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: every operation's requests, by operation and table."""
    lines = [
        "## DynamoDB round trips",
        "",
        "| operation | round trips | item writes | by operation:table |",
        "| --- | ---: | ---: | --- |",
    ]
    rows = dict(result["operations"])
    for configuration, tallies in result.get("with_limits", {}).items():
        rows.update({f"{operation} [{configuration}]": tally for operation, tally in tallies.items()})
    for name, tally in rows.items():
        detail = ", ".join(f"{key} ×{value}" for key, value in tally["by_operation_and_table"].items()) or "none"
        lines.append(f"| {name} | {tally['round_trips']} | {tally['item_writes']} | {detail} |")
    return lines


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
    result = {
        **envelope("round_trips", {"list_pages": args.list_pages, "provider": "in-memory fake (InstrumentedProvider)"}),
        "method": "botocore before-call.dynamodb.* events on every handler's client: exact request counts",
        "operations": results,
        "with_limits": limited,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('round_trips', result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
