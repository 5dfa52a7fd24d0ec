"""Load: N acquire→release cycles at concurrency C against the local stack, then a leak check.

Starts its own local stack (`python -m devstack`, TTL lag as `make run`) on the Docker host DOCKER_HOST/
DOCKER_CERT_PATH name, else on a fresh loopback TLS host. Bounded in cycles (--cycles) and time
(--max-seconds; Ctrl-C alike): then no new cycle starts, those in flight finish. Reported: throughput,
acquire/release/cycle percentiles, errors by kind, CPU by process group, the stack's RSS, and leaks
(managed containers left, leases still listed: both must be 0), in bench/results/load.json and
load.md. Exit 0 when no call failed and nothing leaked, else 1.

    .venv/bin/python bench/load.py [--cycles 1000 --concurrency 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "layers" / "scheduler")]

from bench.common import RESULTS, CpuSnapshot, cell, cpu_by_group, load_average, machine, summary  # noqa: E402
from bench.dockerstack import (  # noqa: E402  # noqa: E402
    LEASE_BODY,
    Cycles,
    DockerTarget,
    api_session,
    docker_target,
    lease_cycle,
    live_leases,
    run_cycles,
    running_stack,
)


class Progress:
    """Every `every` seconds a progress line (and a stack RSS sample); at `max_seconds`, no new cycle."""

    def __init__(self, cycles: int, every: float, max_seconds: float, stack_pid: int | None) -> None:
        self.cycles, self.every, self.max_seconds, self.stack_pid = cycles, every, max_seconds, stack_pid
        self.started = time.monotonic()
        self.next, self.last, self.samples, self.stopped_by = self.started + every, (self.started, 0), [], "done"

    def __call__(self, run: Cycles, stop: threading.Event) -> None:
        now = time.monotonic()
        if now >= self.started + self.max_seconds and not stop.is_set():
            self.stopped_by = "max_seconds"
            stop.set()
            print(f"[load] --max-seconds {self.max_seconds:g} reached: finishing the cycles in flight", flush=True)
        if now >= self.next:
            self.report(run, now)
            self.next = now + self.every

    def report(self, run: Cycles, now: float) -> None:
        with run.lock:
            done, errors, in_flight = run.finished, sum(run.errors.values()), run.in_flight
        rate = (done - self.last[1]) / (now - self.last[0]) if now > self.last[0] else 0.0
        sample: dict[str, Any] = {
            "t": round(now - self.started, 1),
            "done": done,
            "errors": errors,
            "rate": round(rate, 2),
        }
        if (rss := rss_mb(self.stack_pid)) is not None:
            sample["stack_rss_mb"] = rss
        self.samples.append(sample | {"in_flight": in_flight})
        memory = f"  stack RSS {rss:.0f} MB" if rss is not None else ""
        print(
            f"[load] {sample['t']:6.1f} s  done {done}/{self.cycles}  rate {rate:6.2f}/s  errors {errors}  "
            f"in flight {in_flight}{memory}",
            flush=True,
        )
        self.last = (now, done)


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of a process (the stack: gateway, moto's tables and streams live there)."""
    with contextlib.suppress(OSError, ValueError, IndexError, TypeError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def check_leaks(url: str, secret: str, target: DockerTarget, ours: set[str]) -> dict[str, Any]:
    """Managed containers on the Docker host and leases the API still lists, right after the run
    (`*_of_acquired_leases`: those the driver got a 201 for)."""
    containers = target.managed_containers()
    with api_session(secret) as session:
        leases = live_leases(session, url)
    return {
        "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "docker_host": target.env["DOCKER_HOST"],
        "containers": len(containers),
        "containers_of_acquired_leases": len(ours & set(containers)),
        "container_names": sorted(containers.values())[:20],
        "leases": len(leases),
        "leases_of_acquired_leases": sum(1 for lease in leases if lease.get("lease_id") in ours),
        "lease_statuses": dict(Counter(str(lease.get("status")) for lease in leases)),
    }


def markdown(result: dict[str, Any]) -> str:
    """The results as a Markdown report, with the parameters and leak counts."""
    parameters, run, leaks, host = result["parameters"], result["run"], result["leaks"], result["machine"]
    lines = [
        "# Load: acquire → release cycles on the local stack",
        "",
        f"{result['date']} · {host['nproc']} CPU `{host['uname_m']}` · Python {host['python']} · "
        f"{parameters['cycles']} cycles at concurrency {parameters['concurrency']} "
        f"(max {parameters['max_seconds']:g} s) · `{json.dumps(parameters['body'])}` · "
        f"stack started by the bench · code `{result['code']}`",
        "",
        f"**{cell(result['throughput']['cycles_per_second'])} cycles/s** — {run['cycles_ok']} of "
        f"{run['cycles_issued']} cycles succeeded in {cell(run['elapsed_seconds'])} s (stopped: {run['stopped_by']}).",
        "",
        "| latency (ms) | count | p50 | p95 | p99 | max | mean |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {name} | "
            + " | ".join(cell(figures[key]) for key in ("count", "p50", "p95", "p99", "max", "mean"))
            + " |"
            for name, figures in result["latency_ms"].items()
        ),
        "",
        "| errors | count |",
        "| --- | ---: |",
        *([f"| {key} | {count} |" for key, count in sorted(result["errors"]["by_kind"].items())] or ["| none | 0 |"]),
        "",
        "| leaks after the run | count |",
        "| --- | ---: |",
        f"| managed containers on the Docker host | {cell(leaks.get('containers'))} |",
        f"| leases listed by `GET /v1/leases` | {cell(leaks.get('leases'))} |",
        "",
        f"Stack process (gateway, moto) peak RSS: {cell(result['stack'].get('peak_rss_mb'))} MB.",
    ]
    host_cpu = result["stack"].get("host_cpu") or {}
    cycles = max(1, run["cycles_issued"])
    lines += [
        "",
        f"Machine CPU during the load: {cell(host_cpu.get('busy_share'))} busy "
        f"({cell(host_cpu.get('busy_cpu_seconds'))} CPU-s over {host['nproc']} CPUs).",
        "",
        "| CPU by process group | CPU-s | CPU-ms per cycle |",
        "| --- | ---: | ---: |",
        *(
            f"| {name} | {cell(seconds)} | {cell(round(seconds * 1000 / cycles, 1))} |"
            for name, seconds in host_cpu.get("by_group_cpu_seconds", {}).items()
        ),
        "",
        f"Driver: {result['driver']['client']}, {cell(result['driver']['cpu_seconds'])} s CPU.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the load, check for leaks, write the results; 0 only without errors and leaks."""
    parser = argparse.ArgumentParser(
        prog="bench/load.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="stop starting cycles after this long")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in seconds")
    parser.add_argument("--progress-seconds", type=float, default=5.0)
    parser.add_argument("--start-stack", action="store_true", help="(the only mode: kept for older command lines)")
    parser.add_argument("--json", type=Path, default=RESULTS / "load.json", help="results file")
    parser.add_argument("--markdown", type=Path, default=RESULTS / "load.md", help="results table")
    args = parser.parse_args(argv)
    if args.cycles < 1 or args.concurrency < 1 or args.max_seconds <= 0 or args.timeout <= 0:
        parser.error("--cycles and --concurrency must be ≥ 1, --max-seconds and --timeout > 0")
    with docker_target() as target, running_stack(target, {"RECONCILE_INTERVAL_SECONDS": "300"}, 10.0) as running:
        url, secret, stack_pid = running.url, running.secret, running.process.pid
        print(f"[load] {args.cycles} cycles at concurrency {args.concurrency} on {url} (max {args.max_seconds:g} s)")
        progress = Progress(args.cycles, args.progress_seconds, args.max_seconds, stack_pid)
        stack: dict[str, Any] = {"started_by_bench": True, "load_average_before": load_average()}
        driver_before, host_before = resource.getrusage(resource.RUSAGE_SELF), CpuSnapshot.take()
        run = run_cycles(
            lambda session: lease_cycle(session, url, args.timeout),
            args.cycles,
            args.concurrency,
            lambda: api_session(secret),
            tick=progress,
        )
        progress.report(run, time.monotonic())
        driver_after, host_after = resource.getrusage(resource.RUSAGE_SELF), CpuSnapshot.take()
        stack["host_cpu"] = cpu_by_group(host_before, host_after, stack_pid)
        stack["peak_rss_mb"] = max((sample.get("stack_rss_mb", 0.0) for sample in progress.samples), default=None)
        print("[load] checking for leaks ...", flush=True)
        leaks = check_leaks(url, secret, target, run.lease_ids)
    cpu_seconds = (driver_after.ru_utime + driver_after.ru_stime) - (driver_before.ru_utime + driver_before.ru_stime)
    code = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True)
    parameters = {key: getattr(args, key) for key in ("cycles", "concurrency", "max_seconds")}
    result = {
        "benchmark": "load",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "code": code.stdout.strip(),
        "parameters": parameters | {"request_timeout_seconds": args.timeout, "body": LEASE_BODY, "start_stack": True},
        "stack": stack,
        "run": {
            "stopped_by": progress.stopped_by,
            "complete": run.finished == args.cycles,
            "elapsed_seconds": round(run.seconds, 2),
            "cycles_issued": run.issued,
            "cycles_ok": len(run.cycle_ms),
            "cycles_failed": run.finished - len(run.cycle_ms),
        },
        "throughput": {"cycles_per_second": round(len(run.cycle_ms) / run.seconds, 2) if run.seconds else None},
        "latency_ms": {
            name: summary(values, 1)
            for name, values in (("acquire", run.create_ms), ("release", run.remove_ms), ("cycle", run.cycle_ms))
        },
        "errors": {"total": sum(run.errors.values()), "by_kind": dict(sorted(run.errors.items()))},
        "leaks": leaks,
        "progress": progress.samples,
        "driver": {
            "client": "threads + requests (a keep-alive session per worker)",
            "cpu_seconds": round(cpu_seconds, 2),
        },
    }
    for path, text in ((args.json, json.dumps(result, indent=2) + "\n"), (args.markdown, markdown(result))):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(markdown(result))
    print(f"[load] wrote {args.json} and {args.markdown}", flush=True)
    return 1 if leaks["containers"] or leaks["leases"] or result["errors"]["total"] else 0


if __name__ == "__main__":
    sys.exit(main())
