"""`make bench`: every benchmark in turn, then bench/results/summary.md from their JSON results.

The Docker benchmarks (provisioning, expiry lag) share one loopback TLS Docker host started here
(or the one DOCKER_HOST/DOCKER_CERT_PATH name); without dockerd (or root) they are skipped and the
summary says so. Each benchmark runs in its own process. The exit status is 0 when every benchmark
ran — a missed target is a finding in the summary, not a failure of the run.

    .venv/bin/python bench/run_all.py                 # full sizes (under 10 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick --results-dir /tmp/bench   # tiny sizes (what `make test` runs)
    .venv/bin/python bench/run_all.py --only round_trips,sweep_cost
    .venv/bin/python bench/run_all.py --summary-only  # rewrite summary.md from the JSON results
"""

from __future__ import annotations

import argparse
import contextlib
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

from bench.common import RESULTS, machine  # noqa: E402

BENCH = _REPO / "bench"
# name → (full arguments, quick arguments, needs Docker)
BENCHMARKS: dict[str, tuple[list[str], list[str], bool]] = {
    "cold_start": (
        [],
        [
            *("--runs", "1", "--rss-runs", "1", "--importtime-runs", "1"),
            *("--sites", "venv,lambda-bytecode", "--functions", "health,get_lease,acquire_lease"),
        ],
        False,
    ),
    "round_trips": ([], [], False),
    "overhead": (["--iterations", "150"], ["--iterations", "3", "--warmup", "1", "--live-leases", "3"], False),
    "sweep_cost": ([], ["--sizes", "10,30", "--quota-sizes", "10,30"], False),
    "provisioning": (
        [],
        ["--cycles-c1", "2", "--cycles-c8", "8", "--reps", "1", "--warmup-cycles", "2"],
        True,
    ),
    "expiry_lag": ([], ["--leases", "4", "--interval", "1"], True),
}
BUDGET_SECONDS = 600


@contextlib.contextmanager
def shared_docker_host(needed: bool) -> Iterator[dict[str, str]]:
    """DOCKER_* for the Docker benchmarks: the environment's host, one started here, or none."""
    if not needed:
        yield {}
        return
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
                    docker_env = stack.enter_context(shared_docker_host(True))
                env = {key: value for key, value in env.items() if not key.startswith("DOCKER_")} | docker_env
            print(f"==> {name}: {' '.join(command[1:])}", flush=True)
            started = time.monotonic()
            done = subprocess.run(command, env=env, cwd=_REPO, check=False)
            seconds = round(time.monotonic() - started, 1)
            runs[name] = {"exit_status": done.returncode, "seconds": seconds}
            print(f"==> {name}: exit {done.returncode} in {seconds} s", flush=True)
    return runs


# --- the summary ---------------------------------------------------------------------------------


def _load(results_dir: Path, name: str) -> dict[str, Any] | None:
    path = results_dir / f"{name}.json"
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text()))


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _verdict(holds: bool | None) -> str:
    return {True: "holds", False: "**missed**", None: "n/a"}[holds]


def _targets_table(name: str, result: dict[str, Any], *, rss: bool = True) -> list[str]:
    rows = []
    for target in result.get("targets", []):
        if not rss and "peak RSS" in target["name"]:
            continue
        comparison = "≥" if target["comparison"] == ">=" else "≤"
        rows.append(
            f"| {name} | {target['name']} | {_cell(target['value'])} {target['unit']} | "
            f"{comparison} {_cell(target['limit'])} {target['unit']} | {_verdict(target['holds'])} | {target['note']} |"
        )
    return rows


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
    loaded = {name: _load(results_dir, name) for name in BENCHMARKS}
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
                f"| cold_start | peak RSS, all {len(rss)} (site, function) pairs | worst {_cell(worst['value'])} MB "
                f"({worst['name']}) | its memory size | "
                f"{_verdict(all(t['holds'] for t in rss))} | health and authorizer: 128 MB, the rest 256 MB |"
            )
    lines += _cold_start_section(cold)
    lines += _round_trips_section(loaded.get("round_trips"))
    lines += _overhead_section(loaded.get("overhead"))
    lines += _provisioning_section(loaded.get("provisioning"))
    lines += _sweep_section(loaded.get("sweep_cost"))
    lines += _expiry_section(loaded.get("expiry_lag"))
    load_md = results_dir / "load.md"
    if load_md.is_file():
        lines += ["", "## Load", "", "See [load.md](load.md) (bench/load.py, not run by `make bench`).", ""]
    return "\n".join(lines) + "\n"


def _cold_start_section(result: dict[str, Any] | None) -> list[str]:
    if not result or "results" not in result:
        return []
    lines = [
        "",
        "## Cold start",
        "",
        f"{result['parameters']['runs']} interleaved runs per subject; medians. "
        f"Machine busy {result.get('machine_during_run', {}).get('busy_share')}.",
        "",
    ]
    for site, by_subject in result["results"].items():
        bare = by_subject["floor: bare python"]["median_ms"]
        boto = by_subject["floor: boto3 + DynamoDB client"]["median_ms"]
        lines += [
            f"**{site}** — {result['sites'].get(site, '')}",
            "",
            "| subject | median ms | CPU ms | × boto3 floor | − bare floor ms | peak RSS MB |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, figures in sorted(by_subject.items(), key=lambda item: item[1]["median_ms"]):
            label = name if figures.get("timed", True) else f"{name} ({figures['runs']} runs)"
            lines.append(
                f"| {label} | {figures['median_ms']} | {figures['cpu_median_ms']} | "
                f"{figures['median_ms'] / boto:.2f} | {figures['median_ms'] - bare:.1f} | {figures['peak_rss_mb']} |"
            )
        lines.append("")
        imports = result.get("importtime", {}).get(site, {})
        for function in ("get_lease", "acquire_lease"):
            if function in imports:
                packages = ", ".join(f"{p['package']} {p['ms']}" for p in imports[function]["by_package_self_ms"][:10])
                lines.append(f"- importtime {function} (self ms by package): {packages}")
        lines.append("")
    return lines


def _round_trips_section(result: dict[str, Any] | None) -> list[str]:
    if not result or "operations" not in result:
        return []
    lines = [
        "",
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


def _overhead_section(result: dict[str, Any] | None) -> list[str]:
    if not result or "endpoints" not in result:
        return []
    lines = [
        "",
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


def _provisioning_section(result: dict[str, Any] | None) -> list[str]:
    if not result or "results" not in result:
        return []
    lines = [
        "",
        "## Provisioning vs the engine",
        "",
        "| concurrency | kind | cycles/s | create p50 ms | create p95 ms | remove p50 ms | "
        "driver provision p50 ms | acquire − driver p50 ms |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for concurrency, by_mode in result["results"].items():
        for mode, figures in by_mode.items():
            driver = figures.get("driver_provision_ms", {}).get("p50")
            lines.append(
                f"| {concurrency} | {mode} | {figures['cycles_per_second']} | {figures['create_ms']['p50']} | "
                f"{figures['create_ms']['p95']} | {figures['remove_ms']['p50']} | {_cell(driver)} | "
                f"{_cell(figures.get('acquire_minus_driver_p50_ms'))} |"
            )
    lines.append("")
    lines.append(f"Leaks after the run: {result.get('leaks')}")
    return lines


def _sweep_section(result: dict[str, Any] | None) -> list[str]:
    if not result or "runs" not in result:
        return []
    lines = [
        "",
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


def _expiry_section(result: dict[str, Any] | None) -> list[str]:
    if not result or "lag_seconds" not in result:
        return []
    lag = result["lag_seconds"]
    return [
        "",
        "## Expiry lag",
        "",
        f"{result['containers_removed']}/{result['leases_acquired']} containers removed; lag p50 {lag['p50']} s, "
        f"p95 {lag['p95']} s, max {lag['max']} s (sweep every {result['parameters']['sweep_interval_seconds']} s); "
        f"leases ended per sweep {result.get('leases_ended_per_sweep')}; each release inside a sweep p50 "
        f"{result.get('sweep_release_latency_ms', {}).get('p50')} ms (one after another).",
    ]


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
        total = sum(run["seconds"] for run in runs.values())
        print(f"total {total:.0f} s (budget {BUDGET_SECONDS} s)")
        failed = [name for name, run in runs.items() if run["exit_status"] != 0]
        if failed:
            print(f"failed: {', '.join(failed)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
