"""Handler overhead: the time a warm invocation spends in our code, DynamoDB and provider calls excluded.

Every HTTP handler runs in-process and warm (bench/handlers.py). Per invocation, overhead = handler
wall time − wall time inside botocore `_make_api_call` − time inside the provider; the same on thread
CPU time (`overhead_cpu_ms`), and botocore's client-side work apart (`botocore_client_ms`). Logs and
EMF go to a file through fd 1, as Lambda's runtime takes them through a pipe.

    .venv/bin/python bench/overhead.py [--iterations 300]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import (  # noqa: E402
    CpuSnapshot,
    Target,
    busy_since,
    envelope,
    functions,
    print_targets,
    quiet_stdout,
    summary,
    write_result,
)
from bench.handlers import DynamoDB, Handlers, acquire_event, lease_body, list_event, load_event  # noqa: E402

P50_LIMIT_MS = 2.0
P99_LIMIT_MS = 10.0
TARGET_ENDPOINTS = ("health", "acquire", "acquire (Idempotency-Key)", "get", "list", "renew", "release")
ENDPOINTS = ("health", "authorizer", *TARGET_ENDPOINTS[1:])


class Recorder:
    """Per endpoint: total, DynamoDB, provider and overhead times of each invocation."""

    def __init__(self, handlers: Handlers) -> None:
        self.handlers = handlers
        self.samples: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.dynamodb_calls: dict[str, int] = defaultdict(int)
        self.recording = False
        self.ended: list[str] = []
        self.errors: list[dict[str, Any]] = []
        self.log_path: Path | None = None

    def _last_error(self) -> dict[str, Any]:
        """The last ERROR log line the handlers wrote (its exception), for the results."""
        lines = self.log_path.read_text(errors="replace").splitlines()[-200:] if self.log_path else []
        errors = [line for line in lines if '"level":"ERROR"' in line]
        return {"log": errors[-1][-2000:]} if errors else {}

    def call(self, endpoint: str, function: str, event: dict[str, Any], status: int) -> dict[str, Any]:
        meter = self.handlers.meter
        meter.reset()
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
        wall, cpu = time.perf_counter(), time.thread_time()
        response = self.handlers.invoke(function, event)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw - switches
        got = response.get("statusCode") if isinstance(response, dict) and "statusCode" in response else status
        if got != status:
            self.errors.append(
                {"endpoint": endpoint, "status": got, "body": response.get("body"), **self._last_error()}
            )
            raise _Unexpected(endpoint)
        if self.recording:
            sample = self.samples[endpoint]
            inside_wall = meter.wall["dynamodb"] + meter.wall["provider"]
            inside_cpu = meter.cpu["dynamodb"] + meter.cpu["provider"]
            sample["total_ms"].append(wall * 1000)
            sample["dynamodb_ms"].append(meter.wall["dynamodb"] * 1000)
            sample["botocore_client_ms"].append((meter.wall["dynamodb"] - meter.wall["dynamodb_http"]) * 1000)
            sample["provider_ms"].append(meter.wall["provider"] * 1000)
            sample["overhead_ms"].append((wall - inside_wall) * 1000)
            sample["overhead_cpu_ms"].append((cpu - inside_cpu) * 1000)
            sample["involuntary_switches"].append(float(switches))
            if switches == 0:
                sample["overhead_ms_not_preempted"].append((wall - inside_wall) * 1000)
            self.dynamodb_calls[endpoint] += meter.calls["dynamodb"]
        return dict(response)

    def iteration(self) -> None:
        import json

        self.call("health", "health", load_event("health"), 200)
        self.call("authorizer", "authorizer", load_event("authorizer"), 200)
        acquired = self.call("acquire", "acquire_lease", acquire_event(lease_body()), 201)
        lease_id = json.loads(acquired["body"])["lease"]["lease_id"]
        self.call("get", "get_lease", load_event("get_lease", lease_id), 200)
        self.call("list", "list_leases", list_event(owner_id="anim-service", limit="50"), 200)
        self.call("renew", "renew_lease", load_event("renew_lease", lease_id), 200)
        self.call("release", "release_lease", load_event("release_lease", lease_id), 204)
        keyed_event = acquire_event(lease_body(), idempotency_key=uuid.uuid4().hex)
        keyed = self.call("acquire (Idempotency-Key)", "acquire_lease", keyed_event, 201)
        keyed_id = json.loads(keyed["body"])["lease"]["lease_id"]
        self.call("release", "release_lease", load_event("release_lease", keyed_id), 204)
        self.ended.extend([lease_id, keyed_id])

    def clean_up(self) -> None:
        """Delete ended leases and idempotency records (unmeasured): moto copies every table on each
        transaction, so a growing table would slow the run down without changing our code's time."""
        client = self.handlers.modules["acquire_lease"].runtime.store.client
        tables = self.handlers.tables
        for lease_id in self.ended:
            client.delete_item(TableName=tables["LEASES_TABLE"], Key={"lease_id": {"S": lease_id}})
        self.ended.clear()
        for item in client.scan(TableName=tables["IDEMPOTENCY_TABLE"], ProjectionExpression="id").get("Items", []):
            client.delete_item(TableName=tables["IDEMPOTENCY_TABLE"], Key={"id": item["id"]})


class _Unexpected(Exception):
    """An endpoint answered another status than it should (recorded in Recorder.errors)."""


def run(iterations: int, warmup: int, live_leases: int) -> dict[str, Any]:
    import tempfile

    database = DynamoDB()
    log_path = Path(tempfile.mkdtemp(prefix="openalice-overhead-")) / "handlers.log"
    try:
        with quiet_stdout(log_path), Handlers(database, names=functions(http_only=True)) as handlers:
            for _ in range(live_leases):  # the list endpoint answers a realistic page
                handlers.acquire(lease_body())
            recorder = Recorder(handlers)
            recorder.log_path = log_path
            with handlers.meter.patched():
                for _ in range(warmup):
                    with contextlib.suppress(_Unexpected):
                        recorder.iteration()
                    recorder.clean_up()
                busy = CpuSnapshot.take()
                started = time.perf_counter()
                for _ in range(iterations):
                    recorder.recording = True
                    with contextlib.suppress(_Unexpected):  # recorded; the round is cut short
                        recorder.iteration()
                    recorder.recording = False
                    recorder.clean_up()
                seconds = time.perf_counter() - started
                machine_load = busy_since(busy)
    finally:
        database.stop()
        log_path.unlink(missing_ok=True)
    endpoints: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        sample = recorder.samples[endpoint]
        count = len(sample["total_ms"])
        endpoints[endpoint] = {
            **{name: summary(values, 3) for name, values in sample.items()},
            "dynamodb_calls_per_invocation": round(recorder.dynamodb_calls[endpoint] / count, 2) if count else None,
        }
    return {
        "endpoints": endpoints,
        "seconds": round(seconds, 1),
        "machine_during_run": machine_load,
        "unexpected_answers": recorder.errors,
    }


def targets(endpoints: dict[str, Any]) -> list[Target]:
    return [
        Target(
            f"{endpoint}: overhead {p}",
            endpoints[endpoint]["overhead_ms"][p],
            limit,
            "ms",
            note=f"CPU {p} {endpoints[endpoint]['overhead_cpu_ms'][p]} ms",
        )
        for endpoint in TARGET_ENDPOINTS
        for p, limit in (("p50", P50_LIMIT_MS), ("p99", P99_LIMIT_MS))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=300, help="measured rounds over every endpoint")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--live-leases", type=int, default=25, help="live leases the list page returns")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    measured = run(args.iterations, args.warmup, args.live_leases)
    endpoints = measured["endpoints"]
    for error in measured["unexpected_answers"]:
        print(f"  UNEXPECTED: {error['endpoint']} answered {error['status']}: {error.get('log', '')[-800:]}")
    found = targets(endpoints)
    result = {
        **envelope(
            "overhead", {"iterations": args.iterations, "warmup": args.warmup, "live_leases_listed": args.live_leases}
        ),
        "method": (
            "handler wall time minus wall time inside botocore BaseClient._make_api_call and the provider's "
            "methods; CPU variant uses time.thread_time; DynamoDB = moto server in a child process"
        ),
        **measured,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('overhead', result, args.json)}")
    return 0


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: each endpoint's overhead percentiles, wall and CPU."""
    lines = [
        "## Handler overhead (warm, in-process, DynamoDB and provider time excluded)",
        "",
        f"{result['parameters']['iterations']} rounds; machine busy {result['machine_during_run'].get('busy_share')}.",
        "",
        "| endpoint | n | p50 ms | p95 ms | p99 ms | max ms | CPU p50 ms | CPU p99 ms | botocore client p50 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for endpoint, figures in result["endpoints"].items():
        overhead, cpu = figures["overhead_ms"], figures["overhead_cpu_ms"]
        lines.append(
            f"| {endpoint} | {overhead['count']} | {overhead['p50']} | {overhead['p95']} | {overhead['p99']} | "
            f"{overhead['max']} | {cpu['p50']} | {cpu['p99']} | {figures['botocore_client_ms']['p50']} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
