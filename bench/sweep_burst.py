"""Sweep burst: 1,000 leases come due together on a provider whose release takes 0.5 s.

The real `sweep_expired` handler runs in-process (bench/handlers.py) on fresh tables holding N leases
already past their expiry, each with a worker on the in-memory driver made to take `--release-seconds`
per release. One scheduled invocation starts it (with the deployed function's 120 s timeout); when it
hands the rest on, the hand-off runs the next invocation at once, as Lambda's asynchronous invoke does.
The figure is the time from that first invocation until the last worker is released, for the deployed
configuration (SWEEP_CONCURRENCY=32, SWEEP_BATCH_SIZE=1000) and with a small batch that forces a chain
of hand-offs. "1,000 expiring in the same minute, all released within two minutes": a lease waits at
most one schedule interval (60 s) for a run, then the drain time measured here. Writes
bench/results/sweep_burst.json.

    .venv/bin/python bench/sweep_burst.py [--leases 1000 --release-seconds 0.5]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, quiet_stdout, write_result  # noqa: E402
from bench.handlers import DynamoDB, Handlers, load_event  # noqa: E402
from bench.sweep_cost import lease_item  # noqa: E402

SCHEDULE_SECONDS = 60.0
TARGET_SECONDS = 120.0
FUNCTION_TIMEOUT_SECONDS = 120


class InProcessHandoff:
    """The hand-off as Lambda's asynchronous invoke: the next invocation starts at once (here, in a thread)."""

    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers
        self.hops: list[int] = []
        self.threads: list[threading.Thread] = []
        self.results: list[dict[str, Any]] = []

    def hand_on(self, function_name: str, hop: int) -> bool:
        self.hops.append(hop)
        event = {"source": "openalice.scheduler.handoff", "handoff_hop": hop}
        thread = threading.Thread(target=lambda: self.results.append(invoke(self._handlers, event)), daemon=True)
        thread.start()
        self.threads.append(thread)
        return True


def invoke(handlers: Handlers, event: dict[str, Any]) -> dict[str, Any]:
    from devstack.lambda_environment import LambdaContext

    deadline_ms = int((time.time() + FUNCTION_TIMEOUT_SECONDS) * 1000)
    context = LambdaContext("SweepExpiredFunction", 256, f"req-{uuid.uuid4().hex[:8]}", deadline_ms)
    return dict(handlers.modules["sweep_expired"].lambda_handler(event, context))


def burst(database: DynamoDB, leases: int, release_seconds: float, concurrency: int, batch: int) -> dict[str, Any]:
    extra = {"SWEEP_CONCURRENCY": str(concurrency), "SWEEP_BATCH_SIZE": str(batch)}
    with Handlers(database, extra_env=extra, names=("sweep_expired",), read_timeout=30) as handlers:
        module = handlers.modules["sweep_expired"]
        handoff = InProcessHandoff(handlers)
        module.runtime.handoff = handoff
        client = module.runtime.store.client
        now = int(time.time())
        # Due over the last minute, as a burst of expiries spread over one schedule interval.
        items = [lease_item(i, due=now - 1 - i % 60, quota=False) for i in range(leases)]
        for start in range(0, len(items), 25):
            batch_items = [{"PutRequest": {"Item": row}} for row in items[start : start + 25]]
            client.batch_write_item(RequestItems={handlers.tables["LEASES_TABLE"]: batch_items})
        for item in items:
            handlers.provider.add_worker(item["lease_id"]["S"], item["provider_token"]["S"])
        handlers.provider.release_seconds = release_seconds
        started, cpu_started = time.monotonic(), time.process_time()
        first = invoke(handlers, load_event("sweep_expired"))
        while any(thread.is_alive() for thread in list(handoff.threads)):
            for thread in list(handoff.threads):
                thread.join()
        seconds = time.monotonic() - started
        cpu = time.process_time() - cpu_started
        left = len(handlers.provider.workers)
        return {
            "leases": leases,
            "release_seconds": release_seconds,
            "concurrency": concurrency,
            "batch_size": batch,
            "drain_seconds": round(seconds, 1),
            # The handler's CPU (all its threads; DynamoDB is another process): what a Lambda's memory size must cover.
            "cpu_seconds": round(cpu, 1),
            "cpu_ms_per_lease": round(cpu * 1000 / leases, 2),
            "invocations": 1 + len(handoff.hops),
            "hand_offs": len(handoff.hops),
            "workers_left": left,
            "most_releasing_at_once": handlers.provider.most_releasing_at_once,
            "released_per_second": round((leases - left) / seconds, 1),
            "results": [first, *handoff.results],
        }


def targets(runs: list[dict[str, Any]]) -> list[Target]:
    found = []
    for run in runs:
        label = f"{run['leases']} due, release {run['release_seconds']} s, batch {run['batch_size']}"
        found.append(Target(f"{label}: workers left", run["workers_left"], 0))
        worst = SCHEDULE_SECONDS + run["drain_seconds"]
        note = f"{SCHEDULE_SECONDS:g} s schedule + {run['drain_seconds']} s drain, {run['invocations']} invocation(s)"
        found.append(Target(f"{label}: worst expiry → release", round(worst, 1), TARGET_SECONDS, "s", note=note))
    return found


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section."""
    lines = [
        "## Sweep burst (release latency injected)",
        "",
        "| due leases | release | concurrency | batch | invocations | drain | released/s | most at once | left |"
        " CPU per lease |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in result["runs"]:
        lines.append(
            f"| {run['leases']} | {run['release_seconds']} s | {run['concurrency']} | {run['batch_size']} | "
            f"{run['invocations']} | {run['drain_seconds']} s | {run['released_per_second']} | "
            f"{run['most_releasing_at_once']} | {run['workers_left']} | {run['cpu_ms_per_lease']} ms |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leases", type=int, default=1000)
    parser.add_argument("--release-seconds", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=32, help="SWEEP_CONCURRENCY (deployed default 32)")
    parser.add_argument("--batch", type=int, default=1000, help="SWEEP_BATCH_SIZE (deployed default 1000)")
    parser.add_argument("--small-batch", type=int, default=250, help="a second run with this batch (0: none)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    database = DynamoDB()
    runs: list[dict[str, Any]] = []
    try:
        for batch in [args.batch] + ([args.small_batch] if args.small_batch else []):
            with quiet_stdout():
                runs.append(burst(database, args.leases, args.release_seconds, args.concurrency, batch))
            print(
                f"  batch {batch}: {runs[-1]['drain_seconds']} s, {runs[-1]['invocations']} invocation(s)", flush=True
            )
    finally:
        database.stop()
    found = targets(runs)
    result = {
        **envelope(
            "sweep_burst",
            {"leases": args.leases, "release_seconds": args.release_seconds, "concurrency": args.concurrency},
        ),
        "method": "real sweep handler in-process on moto; in-memory driver with a release delay; hand-offs at once",
        "runs": runs,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('sweep_burst', result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
