"""`make bench`: every benchmark in turn, then bench/results/summary.md from their JSON results.

The Docker benchmarks (provisioning, expiry lag) share one loopback TLS Docker host started here
(or the one DOCKER_HOST/DOCKER_CERT_PATH name); without dockerd (or root) they are skipped and the
summary says so. Each benchmark runs in its own process. The exit status is 0 when every benchmark
ran — a missed target is a finding in the summary, not a failure of the run. Each benchmark's own
section of the summary is its `report()`, which it also prints when run alone.

    .venv/bin/python bench/run_all.py                 # full sizes (under 10 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick --results-dir /tmp/bench   # tiny sizes (what `make test` runs)
    .venv/bin/python bench/run_all.py --only round_trips,sweep_cost
    .venv/bin/python bench/run_all.py --summary-only  # rewrite summary.md from the JSON results
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import RESULTS, cell, machine  # noqa: E402

BENCH = _REPO / "bench"
# name → (full arguments, quick arguments, needs Docker)
BENCHMARKS: dict[str, tuple[list[str], list[str], bool]] = {
    "cold_start": (
        [],
        [
            *("--runs", "1", "--rss-runs", "1", "--importtime-runs", "1", "--instruction-runs", "0"),
            *("--functions", "health,get_lease,acquire_lease"),
        ],
        False,
    ),
    "round_trips": ([], [], False),
    "overhead": (["--iterations", "150"], ["--iterations", "3", "--warmup", "1", "--live-leases", "3"], False),
    "sweep_cost": ([], ["--sizes", "10,30", "--quota-sizes", "10,30"], False),
    "sweep_burst": ([], ["--leases", "20", "--release-seconds", "0.05", "--small-batch", "8"], False),
    "scale_out": ([], ["--acquires", "6", "--caps", "2,2", "--runpod-leases", "3"], False),
    "provisioning": (
        [],
        ["--cycles-c1", "2", "--cycles-c8", "8", "--reps", "1", "--warmup-cycles", "2"],
        True,
    ),
    "expiry_lag": ([], ["--leases", "4", "--interval", "1"], True),
    "event_delivery": ([], ["--transitions", "20", "--settle", "30"], True),
    "fairness": ([], ["--admissions", "40", "--stack-admissions", "12"], True),
}
BUDGET_SECONDS = 600


@contextlib.contextmanager
def shared_docker_host() -> Iterator[dict[str, str]]:
    """DOCKER_* for the Docker benchmarks: the environment's host, one started here, or none."""
    from bench.dockerstack import docker_prerequisites, docker_target

    if docker_prerequisites() is not None:
        yield {}
        return
    with docker_target() as target:
        yield dict(target.env)


def run(names: list[str], quick: bool, results_dir: Path) -> dict[str, dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        docker_env: dict[str, str] | None = None
        for name in names:
            full, small, uses_docker = BENCHMARKS[name]
            command = [sys.executable, str(BENCH / f"{name}.py"), *(small if quick else full)]
            command += ["--json", str(results_dir / f"{name}.json")]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_REPO / "layers" / "scheduler"), str(_REPO)])}
            if uses_docker:
                if docker_env is None:  # started when first needed, shared by the Docker benchmarks
                    docker_env = stack.enter_context(shared_docker_host())
                env = {key: value for key, value in env.items() if not key.startswith("DOCKER_")} | docker_env
            print(f"==> {name}: {' '.join(command[1:])}", flush=True)
            started = time.monotonic()
            done = subprocess.run(command, env=env, cwd=_REPO, check=False)
            seconds = round(time.monotonic() - started, 1)
            runs[name] = {"exit_status": done.returncode, "seconds": seconds}
            print(f"==> {name}: exit {done.returncode} in {seconds} s", flush=True)
    return runs


VERDICT = {True: "holds", False: "**missed**", None: "n/a"}


def _targets_table(name: str, result: dict[str, Any], *, rss: bool = True) -> list[str]:
    return [
        f"| {name} | {target['name']} | {cell(target['value'])} {target['unit']} | "
        f"{'≥' if target['comparison'] == '>=' else '≤'} {cell(target['limit'])} {target['unit']} | "
        f"{VERDICT[target['holds']]} | {target['note']} |"
        for target in result.get("targets", [])
        if rss or "peak RSS" not in target["name"]
    ]


def summary_markdown(results_dir: Path, runs: dict[str, dict[str, Any]] | None) -> str:
    host = machine()
    lines = [
        "# Benchmark summary",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {host['nproc']} CPU ({host['cpu_model']}) · "
        f"{host['memory_mb']} MB · Python {host['python']} · {host['platform']}",
        "",
        "Each benchmark's JSON in this directory has every figure; this page has the targets and the headline "
        "numbers. `machine busy` is the share of all CPU time in use during a run (every process on the "
        "machine, not only ours).",
        "",
    ]
    if runs:
        total = sum(run["seconds"] for run in runs.values())
        lines += [
            f"Run: {total:.0f} s in all (budget {BUDGET_SECONDS} s) — "
            + ", ".join(f"{name} {run['seconds']:g} s (exit {run['exit_status']})" for name, run in runs.items()),
            "",
        ]
    lines += [
        "## Targets",
        "",
        "| benchmark | target | measured | limit | verdict | note |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    loaded = {}
    for name in BENCHMARKS:
        path = results_dir / f"{name}.json"
        loaded[name] = json.loads(path.read_text()) if path.is_file() else None
    for name, result in loaded.items():
        if result is None:
            lines.append(f"| {name} | – | not run | | n/a | |")
        elif "skipped" in result:
            lines.append(f"| {name} | – | skipped: {result['skipped']} | | n/a | |")
        else:
            lines += _targets_table(name, result, rss=name != "cold_start")
    cold = loaded.get("cold_start")
    if cold and "results" in cold:
        rss = [t for t in cold["targets"] if "peak RSS" in t["name"]]
        worst = max(rss, key=lambda t: t["value"] / t["limit"]) if rss else None
        if worst:
            lines.append(
                f"| cold_start | peak RSS, all {len(rss)} (site, function) pairs | worst {cell(worst['value'])} MB "
                f"({worst['name']}) | its memory size | "
                f"{VERDICT[all(t['holds'] for t in rss)]} | health and authorizer: 128 MB, the rest 256 MB |"
            )
    for name, result in loaded.items():
        if result and "skipped" not in result:
            lines += ["", *importlib.import_module(f"bench.{name}").report(result)]
    if (results_dir / "load.md").is_file():
        lines += ["", "## Load", "", "See [load.md](load.md) (bench/load.py, not run by `make bench`).", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that every script runs")
    parser.add_argument("--only", help="comma list of benchmarks")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args(argv)
    names = [name for name in (args.only.split(",") if args.only else BENCHMARKS) if name]
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    timings = args.results_dir / "run_all.json"
    if args.summary_only:
        runs = json.loads(timings.read_text()) if timings.is_file() else None
    else:
        runs = run(names, args.quick, args.results_dir)
        timings.write_text(json.dumps(runs, indent=2) + "\n")
    summary = args.results_dir / "summary.md"
    summary.write_text(summary_markdown(args.results_dir, runs))
    print(f"wrote {summary}")
    if runs and not args.summary_only:
        print(f"total {sum(run['seconds'] for run in runs.values()):.0f} s (budget {BUDGET_SECONDS} s)")
        failed = [name for name, run in runs.items() if run["exit_status"] != 0]
        if failed:
            print(f"failed: {', '.join(failed)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
