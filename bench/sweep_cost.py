"""Sweep cost: what one sweep reads with 5 expired leases among 100, 1,000 and 10,000 live ones.

The real `sweep_expired` handler runs in-process (bench/handlers.py) on fresh tables holding N live
leases (due in the future) and 5 expired ones, written with BatchWriteItem (not measured). What one
sweep reads is counted from botocore's events on its client (`ApiCalls`): requests per operation and
table, items returned/scanned and their sizes, and read units by DynamoDB's rule. Also run with a
provider cap and an owner quota (a distinct owner per lease, so the counters table holds one item per
owner), and one reconcile pass on the largest table (its reads and Python heap peak, for
docs/scale.md). Writes bench/results/sweep_cost.json.

    .venv/bin/python bench/sweep_cost.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, quiet_stdout, write_result  # noqa: E402
from bench.handlers import ApiCalls, DynamoDB, Handlers, item_size, load_event  # noqa: E402

EXPIRED = 5
FLAT_TOLERANCE = 0.10


def lease_item(index: int, *, due: int, quota: bool) -> dict[str, Any]:
    """An `active` lease as the store writes it, with a worker token as long as a container id.

    With `quota` every lease has its own owner and holds the provider's and its owner's counters.
    """
    owner = f"owner-{index}" if quota else "anim-service"
    item: dict[str, Any] = {
        "lease_id": {"S": str(uuid.uuid4())},
        **{name: {"S": value} for name, value in (("provider", "local-docker"), ("kind", "renderer"), ("gpu", "none"))},
        "status": {"S": "active"},
        **{name: {"N": str(value)} for name, value in (("created_epoch", due - 600), ("expires_epoch", due))},
        **{name: {"N": str(value)} for name, value in (("ttl_seconds", 600), ("ttl", due), ("due_at", due))},
        "live_shard": {"S": "0"},
        "owner_id": {"S": owner},
        "correlation_id": {"S": f"job-{index}"},
        "provider_token": {"S": uuid.uuid4().hex + uuid.uuid4().hex},
    }
    if quota:
        item["held_counters"] = {"SS": ["provider#local-docker", f"owner#{owner}"]}
    return item


def populate(handlers: Handlers, live: int, *, quota: bool) -> dict[str, Any]:
    """`live` leases due in the future and EXPIRED due in the past, plus their counters (unmeasured)."""
    client = handlers.modules["sweep_expired"].runtime.store.client
    now = int(time.time())
    items = [lease_item(i, due=now + 600 + i % 3000, quota=quota) for i in range(live)]
    items += [lease_item(live + i, due=now - 5 - i, quota=quota) for i in range(EXPIRED)]
    counters: list[dict[str, Any]] = []
    if quota:
        counters.append({"counter": {"S": "provider#local-docker"}, "leases": {"N": str(len(items))}})
        counters += [{"counter": {"S": f"owner#{item['owner_id']['S']}"}, "leases": {"N": "1"}} for item in items]
    started = time.monotonic()
    for table, rows in ((handlers.tables["LEASES_TABLE"], items), (handlers.tables["COUNTERS_TABLE"], counters)):
        for start in range(0, len(rows), 25):
            batch = [{"PutRequest": {"Item": row}} for row in rows[start : start + 25]]
            response = client.batch_write_item(RequestItems={table: batch})
            assert not response.get("UnprocessedItems"), response["UnprocessedItems"]
    for item in items:  # the in-memory provider holds each lease's worker
        handlers.provider.add_worker(item["lease_id"]["S"], item["provider_token"]["S"])
    sizes = sorted(item_size(item) for item in items)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "lease_item_bytes": {"min": sizes[0], "median": sizes[len(sizes) // 2], "max": sizes[-1]},
        "counter_items": len(counters),
    }


def sweep_once(database: DynamoDB, live: int, *, quota: bool, reconcile: bool) -> dict[str, Any]:
    extra = {"LOCAL_DOCKER_MAX_LEASES": "1000000", "MAX_LEASES_PER_OWNER": "100"} if quota else {}
    names = ("sweep_expired", "reconcile_workers") if reconcile else ("sweep_expired",)
    # A 120 s read timeout instead of the deployed 5 s: moto deep-copies every table a transaction touches;
    # at 10,000 items on a busy machine that can take longer than 5 s, botocore then retries, and moto
    # (unlike DynamoDB) ignores the retry's ClientRequestToken, so the retried finish fails its condition
    # and the sweep falls back to a GetItem, an extra read DynamoDB would never cause.
    with Handlers(database, extra_env=extra, names=names, read_timeout=120) as handlers:
        seeded = populate(handlers, live, quota=quota)
        with handlers.calls.recording() as calls:
            started = time.perf_counter()
            report = handlers.invoke("sweep_expired", load_event("sweep_expired"))
            seconds = time.perf_counter() - started
        assert report["ended"] == EXPIRED, report
        result: dict[str, Any] = {
            "live_leases": live,
            "expired": EXPIRED,
            "owner_quota": quota,
            "seeded": seeded,
            "handler_result": report,
            "sweep_index_reads": ApiCalls.reads([call for call in calls if call.operation == "Query"]),
            "handler_reads": ApiCalls.reads(calls),
            "round_trips_by_operation": ApiCalls.tally(calls)["by_operation"],
            "writes": ApiCalls.tally(calls)["write_round_trips"],
            "seconds_in_moto": round(seconds, 3),
        }
        if reconcile:
            result["reconcile"] = reconcile_once(handlers)
        return result


def reconcile_once(handlers: Handlers) -> dict[str, Any]:
    """One reconcile pass over every live lease: its reads, and the Python memory it allocates at its peak
    (tracemalloc; the DynamoDB server is another process, so only the handler's allocations count)."""
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    with handlers.calls.recording() as calls:
        report = handlers.invoke("reconcile_workers", load_event("reconcile_workers"))
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    live = len(handlers.provider.workers)
    return {
        "handler_result": report,
        "live_leases": live,
        "reads": ApiCalls.reads(calls),
        "python_heap_peak_mb": round(peak / 2**20, 1),
        "python_heap_peak_kb_per_lease": round(peak / 1024 / max(1, live), 2),
        "seconds_under_tracemalloc": round(seconds, 1),
    }


def targets(runs: list[dict[str, Any]]) -> list[Target]:
    found: list[Target] = []
    for quota in (False, True):
        chosen = sorted((r for r in runs if r["owner_quota"] == quota), key=lambda r: r["live_leases"])
        if len(chosen) < 2:
            continue
        small, large = chosen[0], chosen[-1]
        label = "with a provider cap and an owner quota, " if quota else ""
        for what, key in (("items read", "items_scanned"), ("read units", "read_units")):
            for scope, field in (("sweep Query", "sweep_index_reads"), ("sweep handler", "handler_reads")):
                base, grown = small[field][key], large[field][key]
                growth = (grown - base) / base if base else float("inf")
                name = f"{label}{scope} {what}: growth {small['live_leases']} → {large['live_leases']} live"
                found.append(Target(name, round(growth, 3), FLAT_TOLERANCE, "×", note=f"{base} → {grown}"))
    return found


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: what one sweep read at each size, and the reconcile pass."""
    lines = [
        "## Sweep cost (5 expired leases)",
        "",
        "| live leases | cap + quota | sweep Query items | sweep Query RRU | handler items | handler RRU | writes |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in result["runs"]:
        index, handler = run["sweep_index_reads"], run["handler_reads"]
        lines.append(
            f"| {run['live_leases']} | {'yes' if run['owner_quota'] else 'no'} | {index['items_scanned']} | "
            f"{index['read_units']} | {handler['items_scanned']} | {handler['read_units']} | {run['writes']} |"
        )
    reconcile = next((run["reconcile"] for run in result["runs"] if "reconcile" in run), None)
    if reconcile:
        lines += [
            "",
            f"Reconcile pass at the largest size: {reconcile['reads']['requests']} requests, "
            f"{reconcile['reads']['items_read']} items, {reconcile['reads']['read_units']} RRU, "
            f"Python heap peak {reconcile['python_heap_peak_mb']} MB "
            f"({reconcile['python_heap_peak_kb_per_lease']} KB per live lease).",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--quota-sizes", default="100,1000", help="sizes with MAX_LEASES_PER_OWNER ('' skips it)")
    parser.add_argument("--no-reconcile", action="store_true", help="skip the reconcile pass on the largest table")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    quota_sizes = [int(size) for size in args.quota_sizes.split(",") if size]
    database = DynamoDB()
    runs: list[dict[str, Any]] = []
    try:
        for quota, chosen in ((False, sizes), (True, quota_sizes)):
            for size in chosen:
                reconcile = not args.no_reconcile and not quota and size == max(sizes)
                with quiet_stdout():
                    runs.append(sweep_once(database, size, quota=quota, reconcile=reconcile))
                print(f"  {'quota ' if quota else ''}{size} live: {runs[-1]['seconds_in_moto']} s", flush=True)
    finally:
        database.stop()
    found = targets(runs)
    result = {
        **envelope("sweep_cost", {"sizes": sizes, "expired": EXPIRED, "tolerance": FLAT_TOLERANCE}),
        "method": "botocore before-call/after-call on the handler's client; read units by DynamoDB's rule",
        "runs": runs,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('sweep_cost', result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
