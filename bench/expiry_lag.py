"""Expiry lag: from a lease's `expires_at` to the removal of its container, when nobody releases it.

The local stack sweeps every 2 s with TTL deletion lagged far out, so the sweep ends every lease; 50
leases with TTLs of 2–10 s are never released; the engine's `destroy` events say when each container
went. Also the sweep's own SweepLag and how many leases each sweep ended, from its EMF lines.

    .venv/bin/python bench/expiry_lag.py [--leases 50 --interval 2]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]


from bench.common import Target, emf_documents, envelope, print_targets, summary, write_result  # noqa: E402
from bench.dockerstack import (  # noqa: E402
    DockerTarget,
    api_session,
    docker_prerequisites,
    docker_target,
    running_stack,
)
from scheduler.providers.base import LEASE_ID_LABEL, MANAGED_LABEL  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

SLACK_SECONDS = 3.0


class Removals:
    """The engine's `destroy` events for managed containers: lease id → removal time (epoch seconds)."""

    def __init__(self, target: DockerTarget) -> None:
        self._client = target.client(timeout=3600)
        self._stream = self._client.api.events(
            decode=True, filters={"type": "container", "event": "destroy", "label": f"{MANAGED_LABEL}=true"}
        )
        self.removed: dict[str, float] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for event in self._stream:
                lease_id = event.get("Actor", {}).get("Attributes", {}).get(LEASE_ID_LABEL)
                if lease_id:
                    with self._lock:
                        self.removed[lease_id] = int(event["timeNano"]) / 1e9
        except Exception:  # noqa: BLE001, S110 - the stream ends when it is closed
            pass

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.removed)

    def close(self) -> None:
        self._stream.close()
        self._client.close()


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def ttl_of(index: int, leases: int) -> int:
    """2..10 s, spread evenly over the leases (interleaved, so expiries do not follow acquire order)."""
    return 2 + (index * 7) % 9 if leases > 1 else 2


def sweep_log(stack: Any, offset: int) -> dict[str, Any]:
    """SweepLag values and leases ended per sweep, from the functions' log lines since `offset`."""
    lags: list[float] = []
    releases: list[float] = []
    per_sweep: list[int] = []
    for function, document in emf_documents(stack.log_path, offset):
        if "SweepLag" in document:
            lags.append(float(document["SweepLag"]))
        if function == "SweepExpiredFunction" and "ReleaseLatency" in document:
            releases.append(float(document["ReleaseLatency"]))
        if document.get("message") == "sweep finished":
            per_sweep.append(int(document.get("ended", 0)))
    return {
        "sweep_lag_metric_s": summary(lags, 2),
        "sweep_release_latency_ms": summary(releases, 1),  # one release after another within a sweep
        "leases_ended_per_sweep": [n for n in per_sweep if n],
    }


def run(leases: int, interval: int, concurrency: int) -> dict[str, Any]:
    with (
        docker_target() as target,
        running_stack(target, {"SWEEP_INTERVAL_SECONDS": str(interval)}, ttl_lag_seconds=3600.0) as stack,
    ):
        removals = Removals(target)
        offset = stack.log_path.stat().st_size
        session = api_session(stack.secret, pool=concurrency)
        acquired: dict[str, dict[str, Any]] = {}
        failures: list[str] = []
        lock = threading.Lock()

        def acquire(index: int) -> None:
            ttl = ttl_of(index, leases)
            started = time.time()
            response = session.post(stack.url + "/v1/lease", json={"kind": "renderer", "ttl_seconds": ttl}, timeout=60)
            with lock:
                if response.status_code != 201:
                    failures.append(f"{response.status_code} {response.text[:100]}")
                    return
                lease = response.json()["lease"]
                acquired[lease["lease_id"]] = {
                    "ttl_seconds": ttl,
                    "expires_at": epoch(lease["expires_at"]),
                    "acquire_seconds": round(time.time() - started, 3),
                }

        started = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(acquire, range(leases)))
        acquire_seconds = time.monotonic() - started
        latest = max((lease["expires_at"] for lease in acquired.values()), default=time.time())
        with contextlib.suppress(AssertionError):  # what is left is reported as not removed
            wait_for(lambda: set(acquired) <= set(removals.snapshot()), max(0.0, latest - time.time()) + interval + 60)
        removed = removals.snapshot()
        removals.close()
        statuses = Counter(
            session.get(f"{stack.url}/v1/lease/{i}", timeout=30).json()["lease"]["status"] for i in acquired
        )
        logged = sweep_log(stack, offset)
    lags = [removed[lease_id] - lease["expires_at"] for lease_id, lease in acquired.items() if lease_id in removed]
    late_acquires = sum(1 for lease in acquired.values() if lease["acquire_seconds"] > lease["ttl_seconds"])
    return {
        "leases_acquired": len(acquired),
        "acquire_failures": failures,
        "acquire_seconds": round(acquire_seconds, 1),
        "acquires_slower_than_their_ttl": late_acquires,
        "containers_removed": len(lags),
        "not_removed": sorted(set(acquired) - set(removed)),
        "lag_seconds": summary(lags, 2),
        "final_statuses": dict(statuses),
        **logged,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leases", type=int, default=50)
    parser.add_argument("--interval", type=int, default=2, help="SWEEP_INTERVAL_SECONDS")
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent acquires")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    parameters = {"leases": args.leases, "sweep_interval_seconds": args.interval, "ttl_seconds": "2..10"}
    missing = docker_prerequisites()
    if missing:
        print(f"expiry_lag: skipped, no Docker host: {missing}")
        write_result("expiry_lag", {**envelope("expiry_lag", parameters), "skipped": missing}, args.json)
        return 0
    measured = run(args.leases, args.interval, args.concurrency)
    lag = measured["lag_seconds"]
    found = [
        Target(
            "expiry lag max",
            lag["max"],
            args.interval + SLACK_SECONDS,
            "s",
            note=f"p50 {lag['p50']} s; interval {args.interval} s + {SLACK_SECONDS:g} s",
        ),
        Target("leases whose container was not removed", float(len(measured["not_removed"])), 0.0),
    ]
    result = {
        **envelope("expiry_lag", parameters | {"local_ttl_lag_seconds": 3600, "acquire_concurrency": args.concurrency}),
        "method": "Docker engine destroy events (timeNano) of managed containers minus the lease's expires_at",
        **measured,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('expiry_lag', result, args.json)}")
    return 0


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: the lag of every lease, and what the sweeps did."""
    lag = result["lag_seconds"]
    return [
        "## Expiry lag",
        "",
        f"{result['containers_removed']}/{result['leases_acquired']} containers removed; lag p50 {lag['p50']} s, "
        f"p95 {lag['p95']} s, max {lag['max']} s (sweep every {result['parameters']['sweep_interval_seconds']} s); "
        f"leases ended per sweep {result.get('leases_ended_per_sweep')}; each release inside a sweep p50 "
        f"{result.get('sweep_release_latency_ms', {}).get('p50')} ms (one after another); acquired in "
        f"{result['acquire_seconds']} s; statuses {result['final_statuses']}; "
        f"failures {len(result['acquire_failures'])}.",
    ]


if __name__ == "__main__":
    sys.exit(main())
