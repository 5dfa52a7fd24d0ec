"""Cold start of every function: a fresh process imports the handler module and runs its init, as Lambda does.

Measured against two floors in the same run: bare `python -c pass` and `import boto3` + a DynamoDB
client. Prints a table and writes bench/results/cold_start.json.

    .venv/bin/python bench/cold_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
FUNCTIONS = (
    "health",
    "authorizer",
    "acquire_lease",
    "list_leases",
    "get_lease",
    "release_lease",
    "renew_lease",
    "sweep_expired",
    "reconcile_workers",
    "ttl_stream",
)
_REPORT_RSS = "import resource,sys; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
FLOORS = {
    "bare python": "pass",
    "boto3 + DynamoDB client": "import boto3; boto3.client('dynamodb')",
}
ENVIRONMENT = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "LEASES_TABLE": "bench-leases",
    "INTERNAL_SECRET": "bench",
    "PROVIDERS": "local-docker",
    "DOCKER_HOST": "tcp://127.0.0.1:9",
    "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
    "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler",
}


def _init_snippet(function: str) -> str:
    # What Lambda's init phase does: put the layer and the function's code on sys.path, import the handler.
    return (
        "import sys; "
        f"sys.path[:0] = [{str(REPO / 'functions' / function)!r}, {str(REPO / 'layers' / 'scheduler')!r}]; "
        "import app"
    )


def measure(code: str, runs: int) -> dict[str, float]:
    """Median wall time (ms) and peak RSS (MB) of `python -c code` over `runs` fresh processes."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "AWS_"))}
    env.update(ENVIRONMENT)
    times, rss = [], []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", f"{code}\n{_REPORT_RSS}"], env=env, capture_output=True, text=True, check=True
        )
        times.append((time.perf_counter() - started) * 1000)
        rss.append(int(done.stderr.strip().splitlines()[-1]) / 1024)
    return {"median_ms": round(statistics.median(times), 1), "peak_rss_mb": round(max(rss), 1)}


def main() -> int:
    """Measure floors and functions, print a table, write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    for name, code in FLOORS.items():
        results[f"floor: {name}"] = measure(code, args.runs)
    for function in FUNCTIONS:
        results[function] = measure(_init_snippet(function), args.runs)
    bare = results["floor: bare python"]["median_ms"]
    boto = results["floor: boto3 + DynamoDB client"]["median_ms"]
    print(f"{'':<32}{'median ms':>10}{'× boto3':>9}{'+ bare ms':>11}{'peak RSS MB':>13}")
    for name, figures in results.items():
        ms = figures["median_ms"]
        print(f"{name:<32}{ms:>10.1f}{ms / boto:>9.2f}{ms - bare:>11.1f}{figures['peak_rss_mb']:>13.1f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cold_start.json").write_text(json.dumps({"runs": args.runs, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
