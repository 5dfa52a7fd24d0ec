"""Sweep cost: what one sweep reads with 5 expired leases among 100, 1,000 and 10,000 live ones.

The real `sweep_expired` handler runs in-process against the embedded DynamoDB (tables from
template.yaml), with an in-memory provider. Each table size gets fresh tables holding N live
leases (due in the future) and 5 expired ones, written with BatchWriteItem (not measured). Then
one sweep runs, and what it reads is counted two ways:

- the store's own `ReadCounters` (`store.reads`: GetItem/Query requests, items returned, and the
  ConsumedCapacity moto reports — moto's figure is not DynamoDB's, so it is reported, not used);
- botocore hooks on the handler's client (`before-call` counts requests per operation and table;
  `after-call` reads each response's Count/ScannedCount and the items' sizes), from which the read
  request units are computed by DynamoDB's rule: per request, the summed size of the items read,
  rounded up to 4 KB, × 0.5 for an eventually consistent read (index queries always are).

Also run: the same with a provider cap and an owner quota set (LOCAL_DOCKER_MAX_LEASES,
MAX_LEASES_PER_OWNER) and a distinct owner per lease, so the counters table holds one item per
owner; and one reconcile pass on the largest table (its reads and how far it raises the process's
peak RSS, for docs/scale.md). Writes bench/results/sweep_cost.json.

    .venv/bin/python bench/sweep_cost.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
import tracemalloc
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, quiet_stdout, write_result  # noqa: E402
from bench.handlers import DynamoDB, Handlers, load_event  # noqa: E402

EXPIRED = 5
FLAT_TOLERANCE = 0.10
BATCH = 25


# --- DynamoDB item sizes and read units ----------------------------------------------------------


def attribute_size(value: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for one attribute value (names are added by item_size)."""
    (kind, content), *_ = value.items()
    if kind in ("S", "B"):
        return len(content.encode() if isinstance(content, str) else content)
    if kind == "N":
        digits = content.lstrip("-").replace(".", "").lstrip("0") or "0"
        return 1 + math.ceil(len(digits) / 2) + (1 if content.startswith("-") else 0)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "BS"):
        return sum(len(part.encode() if isinstance(part, str) else part) for part in content)
    if kind == "NS":
        return sum(attribute_size({"N": part}) for part in content)
    if kind == "L":
        return 3 + sum(1 + attribute_size(part) for part in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + attribute_size(part) for name, part in content.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, dict[str, Any]]) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def read_units(total_bytes: int, *, consistent: bool = False) -> float:
    blocks = max(1, math.ceil(total_bytes / 4096))
    return blocks * (1.0 if consistent else 0.5)


class ReadMeter:
    """botocore after-call hook: per read request, the items returned/scanned and their sizes."""

    def __init__(self, table_roles: dict[str, str]) -> None:
        self.table_roles = table_roles
        self.requests: list[dict[str, Any]] = []

        self.http_attempts: Counter[str] = Counter()

    def register(self, client: Any) -> None:
        client.meta.events.register("after-call.dynamodb.*", self._after_call)
        client.meta.events.register("before-send.dynamodb.*", self._before_send)

    def _before_send(self, event_name: str = "", **_: Any) -> None:
        self.http_attempts[event_name.rsplit(".", 1)[-1]] += 1

    def _after_call(self, parsed: Any = None, model: Any = None, context: Any = None, **_: Any) -> None:
        operation = model.name if model is not None else "?"
        if operation == "BatchGetItem":
            self._batch_get(parsed)
            return
        if operation not in ("Query", "Scan", "GetItem"):
            return
        items = parsed.get("Items") or ([parsed["Item"]] if "Item" in parsed else [])
        size = sum(item_size(item) for item in items)
        capacity = parsed.get("ConsumedCapacity") or {}
        table = self.table_roles.get(capacity.get("TableName", ""), capacity.get("TableName", "?"))
        self.requests.append(
            {
                "operation": operation,
                "table": table,
                "items": len(items),
                "scanned": int(parsed.get("ScannedCount", len(items))),
                "bytes": size,
                # A GetItem here is always ConsistentRead (store.get); Query/Scan are eventually consistent.
                "read_units": read_units(size, consistent=operation == "GetItem"),
                "moto_capacity_units": float(capacity.get("CapacityUnits", 0.0)),
            }
        )

    def _batch_get(self, parsed: dict[str, Any]) -> None:
        """BatchGetItem: each item is rounded up to 4 KB on its own (the store reads counters consistently)."""
        for table_name, items in (parsed.get("Responses") or {}).items():
            self.requests.append(
                {
                    "operation": "BatchGetItem",
                    "table": self.table_roles.get(table_name, table_name),
                    "items": len(items),
                    "scanned": len(items),
                    "bytes": sum(item_size(item) for item in items),
                    "read_units": sum(read_units(item_size(item), consistent=True) for item in items),
                    "moto_capacity_units": 0.0,
                }
            )


def tally(requests: list[dict[str, Any]]) -> dict[str, Any]:
    by: Counter[str] = Counter()
    for request in requests:
        by[f"{request['operation']}:{request['table']}"] += 1
    return {
        "requests": dict(sorted(by.items())),
        "items_read": sum(r["items"] for r in requests),
        "items_scanned": sum(r["scanned"] for r in requests),
        "bytes_read": sum(r["bytes"] for r in requests),
        "read_units": sum(r["read_units"] for r in requests),
        "moto_capacity_units": sum(r["moto_capacity_units"] for r in requests),
    }


# --- the table -----------------------------------------------------------------------------------


def lease_item(index: int, now: int, *, due: int, quota: bool) -> dict[str, Any]:
    """An `active` lease as the store writes it (pending_item + activate), with a fake worker token.

    With `quota` (a provider cap and an owner quota configured) every lease has its own owner and holds
    the provider's and its owner's counters, as create_pending records them.
    """
    lease_id = str(uuid.uuid4())
    owner = f"owner-{index}" if quota else "anim-service"
    item: dict[str, Any] = {
        "lease_id": {"S": lease_id},
        "provider": {"S": "local-docker"},
        "kind": {"S": "renderer"},
        "gpu": {"S": "none"},
        "status": {"S": "active"},
        "created_epoch": {"N": str(due - 600)},
        "expires_epoch": {"N": str(due)},
        "ttl_seconds": {"N": "600"},
        "ttl": {"N": str(due)},
        "live_shard": {"S": "0"},
        "due_at": {"N": str(due)},
        "owner_id": {"S": owner},
        "correlation_id": {"S": f"job-{index}"},
        "provider_token": {"S": uuid.uuid4().hex + uuid.uuid4().hex},  # a Docker container id is 64 hex
    }
    if quota:
        item["held_counters"] = {"SS": ["provider#local-docker", f"owner#{owner}"]}
    return item


def populate(handlers: Handlers, live: int, *, quota: bool) -> dict[str, Any]:
    """`live` leases due in the future and EXPIRED due in the past, plus their counters (unmeasured)."""
    client = handlers.modules["sweep_expired"].store.client
    leases, counters_table = handlers.tables["LEASES_TABLE"], handlers.tables["COUNTERS_TABLE"]
    now = int(time.time())
    items = [lease_item(i, now, due=now + 600 + i % 3000, quota=quota) for i in range(live)]
    items += [lease_item(live + i, now, due=now - 5 - i, quota=quota) for i in range(EXPIRED)]
    counters: list[dict[str, Any]] = []
    if quota:
        counters.append({"counter": {"S": "provider#local-docker"}, "leases": {"N": str(len(items))}})
        counters += [{"counter": {"S": f"owner#{item['owner_id']['S']}"}, "leases": {"N": "1"}} for item in items]
    started = time.monotonic()
    for table, rows in ((leases, items), (counters_table, counters)):
        for start in range(0, len(rows), BATCH):  # nothing for an empty counters table
            batch = [{"PutRequest": {"Item": row}} for row in rows[start : start + BATCH]]
            response = client.batch_write_item(RequestItems={table: batch})
            assert not response.get("UnprocessedItems"), response["UnprocessedItems"]
    for item in items:  # the fake provider holds each lease's worker
        handlers.provider.workers[item["provider_token"]["S"]] = item["lease_id"]["S"]
    sizes = sorted(item_size(item) for item in items)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "lease_item_bytes": {"min": sizes[0], "median": sizes[len(sizes) // 2], "max": sizes[-1]},
        "counter_items": len(counters),
    }


def patient_client(database: DynamoDB, store: Any) -> None:
    """Give the store a client with a 120 s read timeout instead of the deployed 5 s.

    moto deep-copies every table a transaction touches; at 10,000 items on a busy machine that can
    take longer than 5 s, botocore then retries, and moto (unlike DynamoDB) ignores the retry's
    ClientRequestToken, so the retried finish fails its condition and the sweep falls back to a
    GetItem — an extra read DynamoDB would never cause. The requests themselves are unchanged.
    """
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "dynamodb",
        endpoint_url=database.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - moto accepts any
        config=Config(connect_timeout=2, read_timeout=120, retries={"mode": "standard", "max_attempts": 3}),
    )
    store._client = client
    store._errors = client.exceptions


def sweep_once(database: DynamoDB, live: int, *, quota: bool, reconcile: bool) -> dict[str, Any]:
    extra = {"LOCAL_DOCKER_MAX_LEASES": "1000000", "MAX_LEASES_PER_OWNER": "100"} if quota else {}
    names = ("sweep_expired", "reconcile_workers") if reconcile else ("sweep_expired",)
    with Handlers(database, extra_env=extra, names=names) as handlers:
        seeded = populate(handlers, live, quota=quota)
        store = handlers.modules["sweep_expired"].store
        patient_client(database, store)
        handlers.calls.register(store.client)
        meter = ReadMeter({name: role for role, name in handlers.tables.items()})
        meter.register(store.client)
        store.reads.requests = store.reads.items = 0
        store.reads.capacity_units = 0.0
        store.reads.by_operation.clear()
        with handlers.calls.recording() as calls:
            started = time.perf_counter()
            report = handlers.invoke("sweep_expired", load_event("sweep_expired"))
            seconds = time.perf_counter() - started
        assert report["ended"] == EXPIRED, report
        index_reads = [r for r in meter.requests if r["operation"] == "Query"]
        result: dict[str, Any] = {
            "live_leases": live,
            "expired": EXPIRED,
            "owner_quota": quota,
            "seeded": seeded,
            "handler_result": report,
            "sweep_index_reads": tally(index_reads),
            "handler_reads": tally(meter.requests),
            "store_read_counters": {
                "requests": store.reads.requests,
                "items": store.reads.items,
                "moto_capacity_units": store.reads.capacity_units,
                "by_operation": dict(store.reads.by_operation),
            },
            "round_trips_by_operation": dict(sorted(Counter(call.operation for call in calls).items())),
            "writes": sum(1 for call in calls if call.operation in ("UpdateItem", "TransactWriteItems", "PutItem")),
            "http_attempts": dict(sorted(meter.http_attempts.items())),
            "seconds_in_moto": round(seconds, 3),
        }
        if reconcile:
            result["reconcile"] = reconcile_once(handlers, meter, database)
        return result


def reconcile_once(handlers: Handlers, meter: ReadMeter, database: DynamoDB) -> dict[str, Any]:
    """One reconcile pass over every live lease: its reads, and the Python memory it allocates at its peak
    (tracemalloc; the DynamoDB server is another process, so only the handler's allocations count)."""
    module = handlers.modules["reconcile_workers"]
    patient_client(database, module.store)
    meter.register(module.store.client)
    meter.requests.clear()
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    report = handlers.invoke("reconcile_workers", load_event("reconcile_workers"))
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    live = report.get("live_leases") or sum(1 for _ in handlers.provider.workers)
    return {
        "handler_result": report,
        "live_leases": live,
        "reads": tally(meter.requests),
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
                found.append(
                    Target(
                        f"{label}{scope} {what}: growth {small['live_leases']} → {large['live_leases']} live",
                        round(growth, 3),
                        FLAT_TOLERANCE,
                        "×",
                        note=f"{base} → {grown}",
                    )
                )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument(
        "--quota-sizes", default="100,1000", help="sizes for the MAX_LEASES_PER_OWNER variant ('' skips it)"
    )
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
                with quiet_stdout():
                    run = sweep_once(
                        database,
                        size,
                        quota=quota,
                        reconcile=not args.no_reconcile and not quota and size == max(sizes),
                    )
                runs.append(run)
                index, handler = run["sweep_index_reads"], run["handler_reads"]
                print(
                    f"  {'quota ' if quota else ''}{size:>6} live + {EXPIRED} expired: sweep Query "
                    f"{index['requests']} items {index['items_scanned']} RRU {index['read_units']} | handler "
                    f"{handler['requests']} items {handler['items_scanned']} RRU {handler['read_units']} | "
                    f"writes {run['writes']} | store.reads {run['store_read_counters']['requests']} req "
                    f"{run['store_read_counters']['items']} items | {run['seconds_in_moto']} s",
                    flush=True,
                )
    finally:
        database.stop()
    found = targets(runs)
    print_targets(found)
    reconcile = next((run["reconcile"] for run in runs if "reconcile" in run), None)
    if reconcile:
        print(f"  reconcile at {max(sizes)} live: {reconcile}")
    result = {
        **envelope("sweep_cost", {"sizes": sizes, "expired": EXPIRED, "tolerance": FLAT_TOLERANCE}),
        "method": (
            "counts from botocore before-call (requests) and after-call (Count/ScannedCount, item sizes) on the "
            "handler's client, cross-checked with LeaseStore.reads; read units computed by DynamoDB's rule "
            "(ceil(bytes/4 KB) × 0.5 per eventually consistent request); moto's ConsumedCapacity reported, not used"
        ),
        "runs": runs,
        "targets": [target.as_dict() for target in found],
    }
    path = write_result("sweep_cost", result, args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
