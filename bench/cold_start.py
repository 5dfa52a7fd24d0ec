"""Cold start of every function: a fresh process imports its handler module (init included), as Lambda does.

Against two floors in the same run (bare `python -c pass`; `import boto3; boto3.client("dynamodb")`),
every (site, subject) pair once per round in a fresh random order; medians. Sites: `venv` (the
project's .venv) and `lambda-bytecode` (what `sam build` ships: `python -S`, the runtime's boto3
with bytecode behind the byte-compiled layer, the function as sources on a read-only path). Also
peak RSS (VmHWM) and `-X importtime` by package. How, in detail: bench/README.md.

    .venv/bin/python bench/cold_start.py [--runs 15] [--sites venv,lambda-bytecode]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import LAYER, REPO, CpuSnapshot, Target, busy_since, envelope, functions, print_targets, write_result  # noqa: E402

FUNCTIONS = functions()
TARGET_FUNCTIONS = (
    "health",
    "authorizer",
    "acquire_lease",
    "list_leases",
    "get_lease",
    "release_lease",
    "renew_lease",
    "sweep_expired",
    "ttl_stream",
    "reconcile_workers",
    "lifecycle_events",
    "deliver_webhooks",
    "lease_events",
    "create_webhook",
    "list_webhooks",
    "delete_webhook",
)
# Each timed function's limit, as a multiple of the boto3 floor measured in the same run (issue 16).
RATIO_LIMITS = {"acquire_lease": 1.30, "sweep_expired": 1.2, "ttl_stream": 1.2, "reconcile_workers": 1.2}
RATIO_LIMITS |= {"lifecycle_events": 1.2, "deliver_webhooks": 1.2}  # the stream and queue consumers, as ttl_stream
READ_RATIO_LIMIT = 1.12  # get, list, release, renew, the events and webhooks routes; the authorizer (uncached requests)
# Subjects measured once more under another configuration: (name, function, its variables).
VARIANTS = (("authorizer (AUTH_MODE=token)", "authorizer", (("AUTH_MODE", "token"),)),)
TARGET_SITE = "lambda-bytecode"  # the ratios are targets in the deployed layout; the venv's are figures
MEMORY_MB = {"health": 128, "authorizer": 128}  # template.yaml; every other function: Globals 256
DEFAULT_MEMORY_MB = 256
SITES = ("venv", "lambda-bytecode")
BARE, BOTO3 = "floor: bare python", "floor: boto3 + DynamoDB client"
# What a function's process sees (nothing of this shell's PYTHON*, AWS_* or CA-bundle variables).
ENVIRONMENT = dict.fromkeys(
    ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "INTERNAL_SECRET"), "bench"
)
ENVIRONMENT |= {"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "LEASES_TABLE": "bench-leases"}
ENVIRONMENT |= {"PROVIDERS": "local-docker", "DOCKER_HOST": "tcp://127.0.0.1:9", "LOG_LEVEL": "INFO", "LANG": "C.UTF-8"}
ENVIRONMENT |= {"POWERTOOLS_SERVICE_NAME": "openalice-scheduler", "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler"}
# Lambda's Python runtime ships these (with bytecode) in /var/runtime; the layer's copies come first on sys.path.
RUNTIME_DISTRIBUTIONS = ("boto3",)
LAYER_REQUIREMENTS = LAYER / "requirements.txt"


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


def build_sites(workdir: Path) -> dict[str, Site]:
    """Both sites; the Lambda-like one is built under `workdir` (a few seconds, copies only)."""
    venv = Site(
        "venv", layer_paths=(str(LAYER),), description="the project's .venv (dev extras importable, bytecode cached)"
    )
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
    from packaging.requirements import Requirement

    lines = [line.split("#", 1)[0].strip() for line in LAYER_REQUIREMENTS.read_text().splitlines()]
    layer_distributions = _closure([Requirement(line).name for line in lines if line])
    root = workdir / "lambda-bytecode"
    layer = root / "opt-python"
    for distribution in layer_distributions.values():
        _copy_distribution(distribution, layer)
    _copy_sources(LAYER / "scheduler", layer / "scheduler")
    task = root / "var-task"
    for function in FUNCTIONS:
        _copy_sources(REPO / "functions" / function, task / function)
    # As layers/scheduler/Makefile builds it.
    compileall = [sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
    subprocess.run([*compileall, str(layer)], check=True, stdout=subprocess.DEVNULL)
    return {
        "venv": venv,
        "lambda-bytecode": Site(
            "lambda-bytecode",
            flags=("-S",),
            layer_paths=(str(layer), str(runtime)),
            runtime_paths=(str(runtime),),
            read_only=True,
            function_root=task,
            description=(
                "Lambda-like: runtime boto3 with bytecode; layer byte-compiled (unchecked-hash) as "
                "layers/scheduler/Makefile builds it; functions as sources"
            ),
        ),
    }


@dataclass(frozen=True)
class Subject:
    """One thing a fresh process imports: a floor, a function, or a what-if."""

    name: str
    function: str | None = None  # functions/<name>/app.py
    code: str = ""  # floors and what-ifs: the statements to run
    paths: str = "function"  # what goes on sys.path: "none", "runtime" (floor), "layer", "function"
    timed: bool = True  # in the interleaved rounds; else only a few runs for peak RSS
    sites: tuple[str, ...] = SITES
    environment: tuple[tuple[str, str], ...] = ()  # variables beyond ENVIRONMENT (a variant's configuration)

    @property
    def env(self) -> dict[str, str]:
        return CHILD_ENVIRONMENT | dict(self.environment)


WHAT_IF_SITE = "lambda-bytecode"
WHAT_IF_POWERTOOLS = "what-if: boto3 floor + powertools Logger() and Metrics()"
WHAT_IF_MODELS = "what-if: boto3 floor + import scheduler.models (the read functions' wire models)"
WHAT_IF_REQUEST_MODELS = "what-if: boto3 floor + import scheduler.request_models (acquire's inputs)"


def subjects(what_ifs: bool) -> list[Subject]:
    found = [
        Subject(BARE, paths="none"),
        Subject(BOTO3, code="import boto3; boto3.client('dynamodb')", paths="runtime"),
        *(Subject(function, function) for function in TARGET_FUNCTIONS),
        *(Subject(name, function, environment=environment) for name, function, environment in VARIANTS),
        *(
            Subject(function, function, timed=False, sites=SITES)
            for function in FUNCTIONS
            if function not in TARGET_FUNCTIONS
        ),
    ]
    if what_ifs:
        floor = "import boto3; boto3.client('dynamodb'); "
        found += [
            Subject(name, code=floor + code, paths="layer", sites=(WHAT_IF_SITE,))
            for name, code in (
                (WHAT_IF_POWERTOOLS, "from aws_lambda_powertools import Logger, Metrics; Logger(); Metrics()"),
                (WHAT_IF_MODELS, "import scheduler.models"),
                (WHAT_IF_REQUEST_MODELS, "import scheduler.request_models"),
            )
        ]
    return found


_COUNT_MODULES = (
    "print('modules', len(sys.modules)); print('files', sum(1 for m in list(sys.modules.values()) "
    "if getattr(getattr(m, '__spec__', None), 'origin', None) not in (None, 'built-in', 'frozen')))"
)
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
        code_dir = str(site.function_root / subject.function)
        lines.append(f"sys.path[:0] = {[code_dir, *site.layer_paths]!r}")
        lines.append("import app")
    if subject.code:
        lines.append(subject.code)
    lines.append("print('init_ms', (time.perf_counter() - _t) * 1000)")
    # What the kernel's part of init (finding, opening and reading each module's file) follows: the modules loaded
    # and, of them, those read from a file (sources, bytecode, extensions), counted once init is timed.
    lines.append(_COUNT_MODULES)
    # VmHWM: this process image's own peak (ru_maxrss would count the parent's pages the fork copied).
    lines.append(_PEAK_RSS)
    # Lambda's cold start (its Init Duration) ends when init does; the process then serves requests and is
    # never torn down in between. Interpreter finalization (80-110 ms after boto3, growing with the modules
    # loaded) is no part of it: the child leaves without it.
    lines.append("sys.stdout.flush(); import os; os._exit(0)")
    return "\n".join(lines)


_DROPPED = ("PYTHON", "AWS_", "POWERTOOLS_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT", "DOCKER_")
CHILD_ENVIRONMENT = {key: value for key, value in os.environ.items() if not key.startswith(_DROPPED)} | ENVIRONMENT


Samples = dict[str, list[float]]  # wall_ms, cpu_ms, init_ms, rss_mb, modules, files


def run_once(subject: Subject, site: Site) -> tuple[float, float, float, float, int, int]:
    """(wall ms, CPU ms, in-process init ms, peak RSS MB, modules loaded, module files read) of one fresh process."""
    command = [sys.executable, *site.flags, "-c", snippet(subject, site)]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=subject.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/")
    assert process.stdout is not None
    output = process.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - started) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{subject.name} on {site.name} failed ({process.returncode}):\n{output[-3000:]}")
    keys = ("init_ms ", "rss_kb ", "modules ", "files ")
    values = dict(line.split(None, 1) for line in output.splitlines() if line.startswith(keys))
    cpu = (usage.ru_utime + usage.ru_stime) * 1000
    rss = int(values["rss_kb"]) / 1024
    return wall, cpu, float(values["init_ms"]), rss, int(values["modules"]), int(values["files"])


def importtime(subject: Subject, site: Site, repeats: int = 2, top: int = 12) -> dict[str, Any]:
    """`python -X importtime` runs: each module's smallest self time over `repeats` runs (the least
    disturbed by a busy machine), summed by top-level package."""
    command = [sys.executable, *site.flags, "-X", "importtime", "-c", snippet(subject, site)]
    self_ms: dict[str, float] = {}
    totals: list[float] = []
    for _ in range(repeats):
        done = subprocess.run(command, env=subject.env, capture_output=True, text=True, cwd="/")
        total = 0.0
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            _, self_us, cumulative_us, name_field = re.split(r":|\|", line, maxsplit=3)
            if (len(name_field) - len(name_field.lstrip()) - 1) // 2 == 0:  # a top-level import
                total += int(cumulative_us) / 1000
            self_ms[name_field.strip()] = min(self_ms.get(name_field.strip(), float("inf")), int(self_us) / 1000)
        totals.append(total)
    by_package: dict[str, float] = defaultdict(float)
    for name, value in self_ms.items():
        by_package[name.split(".")[0]] += value
    ranked = sorted(by_package.items(), key=lambda item: -item[1])[:top]
    return {
        "total_import_ms": round(min(totals), 1),
        "by_package_self_ms": [{"package": package, "ms": round(ms, 1)} for package, ms in ranked],
        "runs": repeats,
        "note": "-X importtime (which itself slows imports); per module the smallest of the runs; `app` self "
        "time is its module body: the DynamoDB client, settings, the provider registry",
    }


INSTRUCTIONS_TOOL = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")


def instructions(subject: Subject, site: Site, runs: int) -> float | None:
    """Millions of instructions the child executes (valgrind's count of instructions retired, user space):
    the same from run to run to within 0.1 %, where this machine's wall time per run varies by ±15 %.
    None without valgrind. PYTHONHASHSEED is fixed so that dict and set layouts (and so the garbage
    collector's passes) repeat."""
    if shutil.which("valgrind") is None:
        return None
    counts = []
    for _ in range(runs):
        done = subprocess.run(
            [*INSTRUCTIONS_TOOL, sys.executable, *site.flags, "-c", snippet(subject, site)],
            env=subject.env | {"PYTHONHASHSEED": "0"},
            capture_output=True,
            text=True,
            cwd="/",
            check=False,
        )
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"{subject.name} under valgrind failed ({done.returncode}):\n{done.stderr[-3000:]}")
        counts.append(int(found.group(1).replace(",", "")) / 1e6)
    return round(statistics.median(counts), 1)


def measure(
    sites: dict[str, Site], chosen: dict[str, list[Subject]], runs: int, seed: int, rss_runs: int
) -> dict[str, dict[str, Samples]]:
    """`runs` rounds (after one unrecorded warm-up round), each over every timed (site, subject) in a
    fresh random order; then `rss_runs` runs of each untimed subject (peak RSS only).

    In the target site each function runs back to back with the boto3 floor, in a random order within the
    pair, and the pair's ratio is kept: this machine's speed drifts by ±15 % over seconds (other tenants), and a
    ratio of two runs a second apart cancels most of that, where a ratio of two medians does not."""
    timed = [(site, subject) for name, site in sites.items() for subject in chosen[name] if subject.timed]
    untimed = [(site, subject) for name, site in sites.items() for subject in chosen[name] if not subject.timed]
    floors = {site.name: subject for site, subject in timed if subject.name == BOTO3}
    results: dict[str, dict[str, Samples]] = {site: defaultdict(lambda: defaultdict(list)) for site in sites}

    def record(site: Site, subject: Subject) -> float:
        figures = run_once(subject, site)
        for key, value in zip(("wall_ms", "cpu_ms", "init_ms", "rss_mb", "modules", "files"), figures, strict=True):
            results[site.name][subject.name][key].append(value)
        return figures[0]

    def record_paired(site: Site, subject: Subject, floor: Subject) -> None:
        pair = [subject, floor]
        rng.shuffle(pair)
        walls = {each.name: record(site, each) for each in pair}
        results[site.name][subject.name]["floor_ratio"].append(walls[subject.name] / walls[floor.name])

    rng = random.Random(seed)
    for round_number in range(runs + 1):
        rng.shuffle(timed)
        for site, subject in timed:
            if round_number == 0:
                run_once(subject, site)  # warm-up: page cache
            elif subject.function is not None and site.name == TARGET_SITE and site.name in floors:
                record_paired(site, subject, floors[site.name])
            elif subject.name != BOTO3 or site.name != TARGET_SITE or site.name not in floors:
                record(site, subject)
        if round_number and (round_number % 5 == 0 or round_number == runs):
            print(f"  round {round_number}/{runs} done", flush=True)
    for _ in range(rss_runs):
        for site, subject in untimed:
            record(site, subject)
    return results


def figures(samples: Samples, timed: bool) -> dict[str, Any]:
    ordered = sorted(samples["wall_ms"])
    quarter = len(ordered) // 4
    found = {
        "median_ms": round(statistics.median(ordered), 1),
        "iqr_ms": [round(ordered[quarter], 1), round(ordered[-quarter - 1], 1)],
        "cpu_median_ms": round(statistics.median(samples["cpu_ms"]), 1),
        "init_median_ms": round(statistics.median(samples["init_ms"]), 1),
        "peak_rss_mb": round(max(samples["rss_mb"]), 1),
        "modules": int(max(samples["modules"])),
        "module_files": int(max(samples["files"])),
        "runs": len(ordered),
        "timed": timed,
    }
    if samples.get("floor_ratio"):
        ratios = sorted(samples["floor_ratio"])
        quarter = len(ratios) // 4
        found["floor_ratio_median"] = round(statistics.median(ratios), 3)
        found["floor_ratio_iqr"] = [round(ratios[quarter], 3), round(ratios[-quarter - 1], 3)]
    return found


def targets_for(site: str, results: dict[str, dict[str, Any]]) -> list[Target]:
    bare, boto = results[BARE], results[BOTO3]
    found: list[Target] = []
    if "health" in results:
        health = results["health"]
        cpu = round(health["cpu_median_ms"] - bare["cpu_median_ms"], 1)
        extra = round(health["median_ms"] - bare["median_ms"], 1)
        found.append(Target(f"[{site}] health − bare floor", extra, 10.0, "ms", note=f"CPU: {cpu} ms"))
    for name, figure in results.items():
        function = name.split(" ")[0]
        if site == TARGET_SITE and figure["timed"] and function in TARGET_FUNCTIONS and function != "health":
            limit = RATIO_LIMITS.get(function, READ_RATIO_LIMIT)
            # Judged on both: instructions repeat to 0.1 % but leave out the kernel's work (finding, opening and
            # reading each module file) and memory stalls; the paired wall ratio has them, with this machine's noise.
            low, high = figure["floor_ratio_iqr"]
            files = f"{figure['modules']} modules, {figure['module_files']} files (floor {boto['module_files']})"
            wall = f"paired runs' IQR {low:.2f}–{high:.2f}; {files}"
            value = figure["floor_ratio_median"]
            found.append(Target(f"[{site}] {name} ÷ boto3 floor (wall, paired)", value, limit, "×", note=wall))
            if figure.get("instructions_m") and boto.get("instructions_m"):
                ratio = round(figure["instructions_m"] / boto["instructions_m"], 3)
                what = f"instructions {figure['instructions_m']:.0f} M ÷ {boto['instructions_m']:.0f} M"
                found.append(Target(f"[{site}] {name} ÷ boto3 floor (instructions)", ratio, limit, "×", note=what))
    for name, figure in results.items():
        if name.split(" ")[0] in FUNCTIONS:
            memory = MEMORY_MB.get(name.split(" ")[0], DEFAULT_MEMORY_MB)
            found.append(Target(f"[{site}] {name} peak RSS", figure["peak_rss_mb"], memory, "MB"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="measured runs per subject (after a warm-up run)")
    parser.add_argument("--rss-runs", type=int, default=3, help="runs of the functions without a time target")
    parser.add_argument("--no-what-ifs", action="store_true", help="skip the decomposition subjects")
    parser.add_argument("--importtime-runs", type=int, default=2, help="0 to skip importtime")
    parser.add_argument("--functions", help="comma list: only these functions (the floors always run)")
    parser.add_argument(
        "--instruction-runs", type=int, default=1, help="runs under valgrind per subject (0: skip; the targets)"
    )
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="openalice-cold-start-"))
    try:
        sites = build_sites(workdir)
        every = subjects(not args.no_what_ifs)
        only = set(args.functions.split(",")) if args.functions else None
        every = [s for s in every if only is None or not s.function is not None or s.function in only]
        chosen = {name: [subject for subject in every if name in subject.sites] for name in sites}
        timed = sum(1 for value in chosen.values() for subject in value if subject.timed)
        print(f"cold start: {timed} timed (site, subject) pairs × {args.runs + 1} rounds, interleaved", flush=True)
        busy = CpuSnapshot.take()
        started = time.monotonic()
        samples = measure(sites, chosen, args.runs, args.seed, args.rss_runs)
        seconds = round(time.monotonic() - started, 1)
        machine_load = busy_since(busy)
        timed_names = {(name, s.name): s.timed for name, value in chosen.items() for s in value}
        results = {
            site: {name: figures(s, timed_names[(site, name)]) for name, s in by_subject.items()}
            for site, by_subject in samples.items()
        }
        if args.instruction_runs:
            target = sites[TARGET_SITE]
            counted = [s for s in chosen[TARGET_SITE] if s.timed and (s.function is not None or s.name == BOTO3)]
            print(f"instructions: {len(counted)} subjects × {args.instruction_runs} runs under valgrind", flush=True)
            for subject in counted:
                results[TARGET_SITE][subject.name]["instructions_m"] = instructions(
                    subject, target, args.instruction_runs
                )
        imports: dict[str, dict[str, Any]] = {}
        if args.importtime_runs:
            for site_name, site in sites.items():
                imports[site_name] = {
                    s.name: importtime(s, site, args.importtime_runs)
                    for s in chosen[site_name]
                    if s.function is not None and s.timed
                }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    found = [target for site_name, by_subject in results.items() for target in targets_for(site_name, by_subject)]
    print(f"{seconds} s; machine during the run: {machine_load}")
    parameters = {
        "runs": args.runs,
        "warmup_rounds": 1,
        "rss_runs": args.rss_runs,
        "instruction_runs": args.instruction_runs,
        "sites": list(SITES),
    }
    result = {
        **envelope("cold_start", parameters | {"seed": args.seed, "interleaved": True}),
        "method": (
            "fresh `python -c` per run, leaving with os._exit once init is done (no interpreter finalization, as "
            "Lambda's Init Duration has none); wall = spawn to reap, CPU = its user+sys, peak RSS = its VmHWM"
        ),
        "sites": {name: site.description for name, site in sites.items()},
        "seconds": seconds,
        "machine_during_run": machine_load,
        "results": results,
        "importtime": imports,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('cold_start', result, args.json)}")
    return 0


def _instruction_ratio(figures: dict[str, Any], floor: dict[str, Any]) -> str:
    if not figures.get("instructions_m") or not floor.get("instructions_m"):
        return ""
    return f"{figures['instructions_m'] / floor['instructions_m']:.3f}"


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: per site, every subject against the floors, and the top import costs."""
    lines = [
        "## Cold start",
        "",
        f"{result['parameters']['runs']} interleaved runs per subject, each function paired with a boto3 floor run; "
        "medians (× floor: the median of the pairs' ratios). "
        f"Machine busy {result.get('machine_during_run', {}).get('busy_share')}.",
        "",
    ]
    for site, by_subject in result["results"].items():
        bare, boto = by_subject[BARE]["median_ms"], by_subject[BOTO3]["median_ms"]
        lines += [
            f"**{site}** — {result['sites'].get(site, '')}",
            "",
            "| subject | median ms | CPU ms | × boto3 floor (paired) | − bare floor ms | peak RSS MB "
            "| instructions M | × floor (instructions) | modules | module files |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, figures in sorted(by_subject.items(), key=lambda item: item[1]["median_ms"]):
            label = name if figures.get("timed", True) else f"{name} ({figures['runs']} runs)"
            lines.append(
                f"| {label} | {figures['median_ms']} | {figures['cpu_median_ms']} | "
                f"{figures.get('floor_ratio_median', figures['median_ms'] / boto):.2f} | "
                f"{figures['median_ms'] - bare:.1f} | {figures['peak_rss_mb']} | "
                f"{figures.get('instructions_m', '')} | {_instruction_ratio(figures, by_subject[BOTO3])} | "
                f"{figures.get('modules', '')} | {figures.get('module_files', '')} |"
            )
        lines.append("")
        imports = result.get("importtime", {}).get(site, {})
        for function in ("get_lease", "acquire_lease"):
            if function in imports:
                packages = ", ".join(f"{p['package']} {p['ms']}" for p in imports[function]["by_package_self_ms"][:10])
                lines.append(f"- importtime {function} (self ms by package): {packages}")
        lines.append("")
    return lines


if __name__ == "__main__":
    sys.exit(main())
