"""Cold start of every function: a fresh process imports the handler module and runs its init, as Lambda does.

Each run is a new `python` process that puts the function's code and the layer on sys.path and
imports `app` (module-level init included: settings, the DynamoDB client, the provider registry).
Measured against two floors in the same run — bare `python -c pass` and `import boto3;
boto3.client("dynamodb")` — with every (site, subject) pair run once per round, in a fresh random
order each round, so drift of a shared machine lands on every subject alike. Figures are medians.

Sites (what is importable, and whether it is byte-compiled):

- `venv`: the project's .venv as it is (dev extras such as awscrt and pyOpenSSL are importable,
  and boto3 picks them up, so even the boto3 floor is heavier than in Lambda).
- `lambda-bytecode`: what `sam build` ships now (layers/scheduler/Makefile, BuildMethod
  makefile). `python -S` (no venv) with the runtime's boto3/botocore/s3transfer/jmespath/dateutil/
  six/urllib3 (bytecode, as AWS ships them) behind the layer (`scheduler` +
  layers/scheduler/requirements.txt and their dependencies, byte-compiled with
  `compileall --invalidation-mode unchecked-hash`, as that Makefile does); the function code as
  plain sources (SAM copies functions/<name>/ as it is). `/opt` and `/var/task` are read-only in
  Lambda, so the process runs with `sys.dont_write_bytecode`.
- `lambda-no-bytecode` (not run by default): the layer as SAM's own Python builder shipped it
  before (wheels extracted, no `.pyc` at all), compiled at every cold start.

Also per (site, function): peak RSS (the child's VmHWM) and `python -X importtime` runs whose top
offenders (by package and by module, self time) say what to cut. Writes bench/results/cold_start.json.

    .venv/bin/python bench/cold_start.py [--runs 15] [--sites venv,lambda-bytecode,lambda-no-bytecode]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import LAYER, REPO, BusyMeter, Target, envelope, print_targets, write_result  # noqa: E402

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
TARGET_FUNCTIONS = ("health", "acquire_lease", "list_leases", "get_lease", "release_lease", "renew_lease")
MEMORY_MB = {"health": 128, "authorizer": 128}  # template.yaml; every other function: Globals 256
DEFAULT_MEMORY_MB = 256
SITES = ("venv", "lambda-bytecode", "lambda-no-bytecode")
DEFAULT_SITES = ("venv", "lambda-bytecode")
BARE, BOTO3 = "floor: bare python", "floor: boto3 + DynamoDB client"
ENVIRONMENT = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_SESSION_TOKEN": "bench",
    "LEASES_TABLE": "bench-leases",
    "INTERNAL_SECRET": "bench",
    "PROVIDERS": "local-docker",
    "DOCKER_HOST": "tcp://127.0.0.1:9",
    "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
    "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler",
    "LOG_LEVEL": "INFO",
    "LANG": "C.UTF-8",
}
# Lambda's Python runtime ships these (with bytecode) in /var/runtime; the layer's copies come first on sys.path.
RUNTIME_DISTRIBUTIONS = ("boto3",)
LAYER_REQUIREMENTS = LAYER / "requirements.txt"


# --- sites ---------------------------------------------------------------------------------------


@dataclass
class Site:
    """Where a subject's imports come from: interpreter flags and the paths put in front of sys.path."""

    name: str
    flags: tuple[str, ...] = ()
    layer_paths: tuple[str, ...] = ()  # for functions: [code dir] + these
    runtime_paths: tuple[str, ...] = ()  # for the boto3 floor
    read_only: bool = False  # no bytecode written (Lambda's /var/task and /opt)
    function_root: Path = REPO / "functions"
    description: str = ""


def _requirement_names(path: Path) -> list[str]:
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0])
    return names


def _closure(names: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """The distributions `names` need (no extras), from the venv's metadata."""
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    found: dict[str, importlib.metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        found[key] = importlib.metadata.distribution(name)
        for requirement in found[key].requires or []:
            parsed = Requirement(requirement)
            if parsed.marker is not None and not Marker(str(parsed.marker)).evaluate({"extra": ""}):
                continue
            pending.append(parsed.name)
    return found


def _copy_distribution(distribution: importlib.metadata.Distribution, target: Path) -> None:
    """The distribution's files as its wheel carries them: sources and extensions, no bytecode."""
    for file in distribution.files or []:
        if file.suffix == ".pyc" or "__pycache__" in file.parts or file.parts[0] == "..":
            continue
        source = Path(str(file.locate()))
        if source.is_file():
            destination = target / file
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


def _copy_sources(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)


def build_sites(workdir: Path, names: tuple[str, ...]) -> dict[str, Site]:
    """The sites asked for; the Lambda-like ones are built under `workdir` (a few seconds, copies only)."""
    sites: dict[str, Site] = {}
    if "venv" in names:
        sites["venv"] = Site(
            "venv",
            layer_paths=(str(LAYER),),
            description="the project's .venv (dev extras importable, bytecode cached)",
        )
    lambda_names = [name for name in names if name.startswith("lambda-")]
    if not lambda_names:
        return sites
    runtime = workdir / "runtime"
    runtime.mkdir(parents=True)
    runtime_distributions = _closure(list(RUNTIME_DISTRIBUTIONS))
    for distribution in runtime_distributions.values():  # with the venv's bytecode, as AWS ships them
        tops = {Path(str(file)).parts[0] for file in distribution.files or []}
        for top in tops:
            if top in ("..", "__pycache__") or top.endswith(".pyc"):
                continue
            source = Path(str(distribution.locate_file(top)))
            if source.exists() and not (runtime / top).exists():
                (runtime / top).symlink_to(source)
    layer_distributions = _closure(_requirement_names(LAYER_REQUIREMENTS))
    for name in lambda_names:
        root = workdir / name
        layer = root / "opt-python"
        for distribution in layer_distributions.values():
            _copy_distribution(distribution, layer)
        _copy_sources(LAYER / "scheduler", layer / "scheduler")
        functions = root / "var-task"
        for function in FUNCTIONS:
            _copy_sources(REPO / "functions" / function, functions / function)
        compiled = name == "lambda-bytecode"
        if compiled:  # as layers/scheduler/Makefile does
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "compileall",
                    "-q",
                    "-j",
                    "0",
                    "--invalidation-mode",
                    "unchecked-hash",
                    str(layer),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        sites[name] = Site(
            name,
            flags=("-S",),
            layer_paths=(str(layer), str(runtime)),
            runtime_paths=(str(runtime),),
            read_only=True,
            function_root=functions,
            description=(
                "Lambda-like: runtime boto3 with bytecode; "
                + (
                    "layer byte-compiled (unchecked-hash) as layers/scheduler/Makefile builds it; functions as sources"
                    if compiled
                    else "layer and function code as sources only, compiled at every cold start (SAM's Python builder)"
                )
            ),
        )
    return sites


# --- subjects ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    """One thing a fresh process imports: a floor, a function, or a what-if."""

    name: str
    function: str | None = None  # functions/<name>/app.py
    code: str = ""  # floors and what-ifs: the statements to run
    paths: str = "function"  # what goes on sys.path: "none", "runtime" (floor), "layer", "function"
    env: tuple[tuple[str, str], ...] = ()
    timed: bool = True  # in the interleaved rounds; else only a few runs for peak RSS
    sites: tuple[str, ...] = SITES
    proposed_dir: str | None = None  # a what-if function directory (not the shipped code)

    @property
    def is_floor(self) -> bool:
        return self.name.startswith("floor:")

    @property
    def is_function(self) -> bool:
        return self.function is not None


WHAT_IF_SITE = "lambda-bytecode"
WHAT_IF_POWERTOOLS = "what-if: boto3 floor + powertools Logger() and Metrics()"
WHAT_IF_MODELS = "what-if: boto3 floor + import scheduler.models (pydantic)"
WHAT_IF_PYDANTIC = "what-if: boto3 floor + import pydantic (no models)"


def subjects(extra_providers: bool, what_ifs: bool, workdir: Path) -> list[Subject]:
    found = [
        Subject(BARE, paths="none"),
        Subject(BOTO3, code="import boto3; boto3.client('dynamodb')", paths="runtime"),
        *(Subject(function, function) for function in TARGET_FUNCTIONS),
        *(
            Subject(function, function, timed=False, sites=DEFAULT_SITES)
            for function in FUNCTIONS
            if function not in TARGET_FUNCTIONS
        ),
    ]
    if extra_providers:
        for providers in ("runpod", "local-docker,runpod"):
            found.append(
                Subject(f"acquire_lease [PROVIDERS={providers}]", "acquire_lease", env=(("PROVIDERS", providers),))
            )
    if what_ifs:
        found += [
            Subject(
                WHAT_IF_POWERTOOLS,
                code="import boto3; boto3.client('dynamodb'); from aws_lambda_powertools import Logger, Metrics; "
                "Logger(); Metrics()",
                paths="layer",
                sites=(WHAT_IF_SITE,),
            ),
            Subject(
                WHAT_IF_PYDANTIC,
                code="import boto3; boto3.client('dynamodb'); from pydantic import BaseModel",
                paths="layer",
                sites=(WHAT_IF_SITE,),
            ),
            Subject(
                WHAT_IF_MODELS,
                code="import boto3; boto3.client('dynamodb'); import scheduler.models",
                paths="layer",
                sites=(WHAT_IF_SITE,),
            ),
        ]
    return found


_PEAK_RSS = "print('rss_kb', next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))"


def snippet(subject: Subject, site: Site) -> str:
    """The child's program: set up sys.path as Lambda's init would, import, print init ms and peak RSS."""
    lines = ["import sys, time", "_t = time.perf_counter()"]
    if site.read_only:
        lines.append("sys.dont_write_bytecode = True")
    if subject.paths == "runtime":
        lines.append(f"sys.path[:0] = {list(site.runtime_paths)!r}")
    elif subject.paths == "layer":
        lines.append(f"sys.path[:0] = {list(site.layer_paths)!r}")
    elif subject.paths == "function":
        assert subject.function is not None
        code_dir = subject.proposed_dir or str(site.function_root / subject.function)
        lines.append(f"sys.path[:0] = {[code_dir, *site.layer_paths]!r}")
        lines.append("import app")
    if subject.code:
        lines.append(subject.code)
    lines.append("print('init_ms', (time.perf_counter() - _t) * 1000)")
    # VmHWM: this process image's own peak (ru_maxrss would count the parent's pages the fork copied).
    lines.append(_PEAK_RSS)
    return "\n".join(lines)


def child_environment(subject: Subject) -> dict[str, str]:
    """No PYTHON*, AWS_* or CA-bundle variables from this shell: only what a Lambda function would see."""
    dropped = ("PYTHON", "AWS_", "POWERTOOLS_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT", "DOCKER_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(ENVIRONMENT)
    env.update(dict(subject.env))
    return env


# --- measuring -----------------------------------------------------------------------------------


@dataclass
class Samples:
    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    init_ms: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)


def run_once(subject: Subject, site: Site) -> tuple[float, float, float, float]:
    """(wall ms, CPU ms, in-process init ms, peak RSS MB) of one fresh process."""
    command = [sys.executable, *site.flags, "-c", snippet(subject, site)]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=child_environment(subject), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/"
    )
    assert process.stdout is not None
    output = process.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - started) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{subject.name} on {site.name} failed ({process.returncode}):\n{output[-3000:]}")
    values = dict(line.split(None, 1) for line in output.splitlines() if line.startswith(("init_ms ", "rss_kb ")))
    return wall, (usage.ru_utime + usage.ru_stime) * 1000, float(values["init_ms"]), int(values["rss_kb"]) / 1024


def importtime(subject: Subject, site: Site, repeats: int = 2, top: int = 12) -> dict[str, Any]:
    """`python -X importtime` runs: each module's smallest self time over `repeats` runs (the least
    disturbed by a busy machine), summed by top-level package, and the slowest modules."""
    command = [sys.executable, *site.flags, "-X", "importtime", "-c", snippet(subject, site)]
    self_ms: dict[str, float] = {}
    cumulative_ms: dict[str, float] = {}
    totals: list[float] = []
    for _ in range(repeats):
        done = subprocess.run(
            command, env=child_environment(subject), capture_output=True, text=True, cwd="/", check=True
        )
        total = 0.0
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            _, self_us, cumulative_us, name_field = re.split(r":|\|", line, maxsplit=3)
            name = name_field.strip()
            depth = (len(name_field) - len(name_field.lstrip()) - 1) // 2
            if depth == 0:
                total += int(cumulative_us) / 1000
            self_ms[name] = min(self_ms.get(name, float("inf")), int(self_us) / 1000)
            cumulative_ms[name] = min(cumulative_ms.get(name, float("inf")), int(cumulative_us) / 1000)
        totals.append(total)
    by_package: dict[str, float] = defaultdict(float)
    for name, value in self_ms.items():
        by_package[name.split(".")[0]] += value
    slowest = sorted(self_ms.items(), key=lambda item: -item[1])[:top]
    return {
        "total_import_ms": round(min(totals), 1),
        "by_package_self_ms": [
            {"package": package, "ms": round(ms, 1)}
            for package, ms in sorted(by_package.items(), key=lambda item: -item[1])[:top]
        ],
        "slowest_modules_self_ms": [
            {"module": name, "self_ms": round(value, 1), "cumulative_ms": round(cumulative_ms[name], 1)}
            for name, value in slowest
        ],
        "runs": repeats,
        "note": "-X importtime (which itself slows imports); per module the smallest of the runs; `app` self "
        "time is its module body: the DynamoDB client, settings, the provider registry",
    }


def measure(
    sites: dict[str, Site], chosen: dict[str, list[Subject]], runs: int, seed: int, rss_runs: int
) -> dict[str, dict[str, Samples]]:
    """`runs` rounds (after one unrecorded warm-up round), each over every timed (site, subject) in a
    fresh random order; then `rss_runs` runs of each untimed subject (peak RSS only)."""
    timed = [(site, subject) for name, site in sites.items() for subject in chosen[name] if subject.timed]
    untimed = [(site, subject) for name, site in sites.items() for subject in chosen[name] if not subject.timed]
    results: dict[str, dict[str, Samples]] = {site: defaultdict(Samples) for site in sites}
    rng = random.Random(seed)
    for round_number in range(runs + 1):
        rng.shuffle(timed)
        for site, subject in timed:
            wall, cpu, init, rss = run_once(subject, site)
            if round_number == 0:
                continue  # warm-up: page cache
            samples = results[site.name][subject.name]
            samples.wall_ms.append(wall)
            samples.cpu_ms.append(cpu)
            samples.init_ms.append(init)
            samples.rss_mb.append(rss)
        if round_number and (round_number % 5 == 0 or round_number == runs):
            print(f"  round {round_number}/{runs} done", flush=True)
    for _ in range(rss_runs):
        for site, subject in untimed:
            wall, cpu, init, rss = run_once(subject, site)
            samples = results[site.name][subject.name]
            samples.wall_ms.append(wall)
            samples.cpu_ms.append(cpu)
            samples.init_ms.append(init)
            samples.rss_mb.append(rss)
    return results


def figures(samples: Samples, timed: bool) -> dict[str, Any]:
    ordered = sorted(samples.wall_ms)
    quarter = len(ordered) // 4
    return {
        "median_ms": round(statistics.median(samples.wall_ms), 1),
        "iqr_ms": [round(ordered[quarter], 1), round(ordered[-quarter - 1], 1)],
        "cpu_median_ms": round(statistics.median(samples.cpu_ms), 1),
        "init_median_ms": round(statistics.median(samples.init_ms), 1),
        "peak_rss_mb": round(max(samples.rss_mb), 1),
        "runs": len(samples.wall_ms),
        "timed": timed,
    }


def targets_for(site: str, results: dict[str, dict[str, Any]]) -> list[Target]:
    bare, boto = results[BARE], results[BOTO3]
    found: list[Target] = []
    for name in ("health",):
        if name in results:
            found.append(
                Target(
                    f"[{site}] {name} − bare floor",
                    round(results[name]["median_ms"] - bare["median_ms"], 1),
                    10.0,
                    "ms",
                    note=f"CPU: {round(results[name]['cpu_median_ms'] - bare['cpu_median_ms'], 1)} ms",
                )
            )
    for name, figure in results.items():
        function = name.split(" ")[0]
        if not figure["timed"] or function not in TARGET_FUNCTIONS or function == "health":
            continue
        limit = 1.4 if function == "acquire_lease" else 1.2
        found.append(
            Target(
                f"[{site}] {name} ÷ boto3 floor",
                round(figure["median_ms"] / boto["median_ms"], 3),
                limit,
                "×",
                note=f"CPU ratio {figure['cpu_median_ms'] / boto['cpu_median_ms']:.2f}",
            )
        )
    for name, figure in results.items():
        function = name.split(" ")[0]
        if function not in FUNCTIONS:
            continue
        memory = MEMORY_MB.get(function, DEFAULT_MEMORY_MB)
        found.append(Target(f"[{site}] {name} peak RSS", figure["peak_rss_mb"], memory, "MB"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="measured runs per subject (after a warm-up run)")
    parser.add_argument("--rss-runs", type=int, default=3, help="runs of the functions without a time target")
    parser.add_argument("--sites", default=",".join(DEFAULT_SITES), help=f"from {', '.join(SITES)}")
    parser.add_argument("--provider-variants", action="store_true", help="also acquire with PROVIDERS=runpod / both")
    parser.add_argument("--no-what-ifs", action="store_true", help="skip the decomposition subjects")
    parser.add_argument("--importtime-runs", type=int, default=2, help="0 to skip importtime")
    parser.add_argument("--functions", help="comma list: only these functions (the floors always run)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    names = tuple(name for name in args.sites.split(",") if name)
    unknown = set(names) - set(SITES)
    if unknown:
        parser.error(f"unknown site(s): {', '.join(sorted(unknown))}")
    workdir = Path(tempfile.mkdtemp(prefix="openalice-cold-start-"))
    try:
        sites = build_sites(workdir, names)
        every = subjects(args.provider_variants, not args.no_what_ifs and WHAT_IF_SITE in names, workdir)
        only = set(args.functions.split(",")) if args.functions else None
        every = [s for s in every if only is None or not s.is_function or s.function in only]
        chosen = {name: [subject for subject in every if name in subject.sites] for name in sites}
        timed = sum(1 for value in chosen.values() for subject in value if subject.timed)
        print(f"cold start: {timed} timed (site, subject) pairs × {args.runs + 1} rounds, interleaved", flush=True)
        busy = BusyMeter()
        started = time.monotonic()
        samples = measure(sites, chosen, args.runs, args.seed, args.rss_runs)
        seconds = round(time.monotonic() - started, 1)
        machine_load = busy.stop()
        timed_names = {(name, s.name): s.timed for name, value in chosen.items() for s in value}
        results = {
            site: {name: figures(s, timed_names[(site, name)]) for name, s in by_subject.items()}
            for site, by_subject in samples.items()
        }
        imports: dict[str, dict[str, Any]] = {}
        if args.importtime_runs:
            for site_name, site in sites.items():
                imports[site_name] = {
                    s.name: importtime(s, site, args.importtime_runs)
                    for s in chosen[site_name]
                    if s.is_function and s.timed and s.proposed_dir is None
                }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    found: list[Target] = []
    for site_name, by_subject in results.items():
        bare, boto = by_subject[BARE]["median_ms"], by_subject[BOTO3]["median_ms"]
        print(f"\n[{site_name}] {sites[site_name].description}")
        print(f"  {'':<58}{'median ms':>10}{'IQR':>12}{'CPU ms':>8}{'× boto3':>9}{'+ bare':>8}{'RSS MB':>8}")
        for name, figure in sorted(by_subject.items(), key=lambda item: item[1]["median_ms"]):
            iqr = f"{figure['iqr_ms'][0]:.0f}–{figure['iqr_ms'][1]:.0f}"
            label = name if figure["timed"] else f"{name} ({figure['runs']} runs, RSS only)"
            print(
                f"  {label:<58}{figure['median_ms']:>10.1f}{iqr:>12}{figure['cpu_median_ms']:>8.0f}"
                f"{figure['median_ms'] / boto:>9.2f}{figure['median_ms'] - bare:>8.1f}{figure['peak_rss_mb']:>8.1f}"
            )
        found += targets_for(site_name, by_subject)
        for name, report in imports.get(site_name, {}).items():
            packages = ", ".join(f"{p['package']} {p['ms']}" for p in report["by_package_self_ms"][:8])
            print(f"  importtime {name}: {packages}")
    print(f"\n{seconds} s; machine during the run: {machine_load}")
    print_targets(found)
    result = {
        **envelope(
            "cold_start",
            {
                "runs": args.runs,
                "warmup_rounds": 1,
                "rss_runs": args.rss_runs,
                "sites": list(names),
                "seed": args.seed,
                "interleaved": True,
            },
        ),
        "method": (
            "fresh `python -c` per run; wall = spawn to reap (os.wait4), CPU = the child's user+sys, "
            "init = in-process time of the imports, peak RSS = the child's VmHWM; rounds over every timed "
            "(site, subject) in a fresh random order"
        ),
        "sites": {name: site.description for name, site in sites.items()},
        "seconds": seconds,
        "machine_during_run": machine_load,
        "results": results,
        "importtime": imports,
        "targets": [target.as_dict() for target in found],
    }
    path = write_result("cold_start", result, args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
