"""What every benchmark shares: paths, the functions, the machine and where its CPU went, percentiles,
targets and result files.

Not a benchmark itself. The scripts import it as `bench.common` (each puts the repository on
sys.path first, so `python bench/<name>.py` works without PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
LAYER = REPO / "layers" / "scheduler"


def functions(*, http_only: bool = False) -> tuple[str, ...]:
    """The functions' directory names, as template.yaml declares them (HTTP: its routes' and the authorizer)."""
    from devstack.template import SamTemplate

    template = SamTemplate.load()
    routed = {route.function for route in template.routes} | (
        {template.authorizer.function} if template.authorizer else set()
    )
    return tuple(spec.code_dir.name for name, spec in template.functions.items() if not http_only or name in routed)


def summary(values: Sequence[float], digits: int = 2) -> dict[str, Any]:
    """count, min, p50, p95, p99, max and mean (None when empty); percentiles interpolated as numpy's default."""
    if not values:
        return dict.fromkeys(("min", "p50", "p95", "p99", "max", "mean"), None) | {"count": 0}
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    figures = {"min": min(values), "p50": cuts[49], "p95": cuts[94], "p99": cuts[98], "max": max(values)}
    return {
        "count": len(values),
        **{k: round(v, digits) for k, v in figures.items()},
        "mean": round(statistics.fmean(values), digits),
    }


@dataclass(frozen=True)
class Target:
    """One target of the issue: `value` compared with `limit` (≤ unless `at_least`)."""

    name: str
    value: float | None
    limit: float | None
    unit: str = ""
    at_least: bool = False
    note: str = ""

    @property
    def holds(self) -> bool | None:
        if self.value is None or self.limit is None:
            return None
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    def as_dict(self) -> dict[str, Any]:
        figures = {key: value for key, value in asdict(self).items() if key != "at_least"}
        return figures | {"comparison": ">=" if self.at_least else "<=", "holds": self.holds}


def load_average() -> list[float] | None:
    with contextlib.suppress(OSError, AttributeError):
        return [round(value, 2) for value in os.getloadavg()]
    return None


def machine() -> dict[str, Any]:
    """CPUs, model, memory, Python and the load average, as every result's context."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), None)
    memory_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 if Path("/proc/meminfo").exists() else None
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "memory_mb": memory_mb,
        "uname_m": platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": load_average(),
    }


def busy_since(before: CpuSnapshot) -> dict[str, Any]:
    """The share of the machine's CPU time busy since `before` (all processes: a slow figure on a busy
    shared machine can be told apart), and the load average now."""
    after = CpuSnapshot.take()
    busy, wall = after.busy - before.busy, (after.busy + after.idle) - (before.busy + before.idle)
    return {"busy_share": round(busy / wall, 3) if wall else None, "load_average_after": load_average()}


def write_result(name: str, result: dict[str, Any], path: Path | None = None) -> Path:
    """bench/results/<name>.json (or `path`), written atomically."""
    target = path or RESULTS / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(result, indent=2, default=str) + "\n")
    temporary.replace(target)
    return target


def envelope(benchmark: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The fields every result file starts with."""
    return {
        "benchmark": benchmark,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "parameters": parameters,
    }


def cell(value: Any) -> str:
    """A figure as a Markdown table shows it."""
    if value is None:
        return "–"
    return f"{value:g}" if isinstance(value, float) else str(value)


def print_targets(targets: Sequence[Target]) -> None:
    for target in targets:
        verdict = {True: "holds", False: "MISSED", None: "n/a"}[target.holds]
        value = "–" if target.value is None else f"{target.value:g}"
        limit = "–" if target.limit is None else f"{target.limit:g}"
        comparison = "≥" if target.at_least else "≤"
        print(f"  [{verdict:>6}] {target.name}: {value} {comparison} {limit} {target.unit}".rstrip())


@contextlib.contextmanager
def quiet_stdout(path: Path | None = None) -> Iterator[None]:
    """Send file descriptor 1 (the handlers' log lines and EMF documents) to `path` or /dev/null, as a
    pipe would take them in Lambda."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(str(path) if path else os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


_TICK = os.sysconf("SC_CLK_TCK")
_DOCKER = ("dockerd", "containerd", "containerd-shim", "runc", "docker-init", "docker-proxy")


@dataclass
class CpuSnapshot:
    """Per-process CPU seconds (utime + stime: a reaped child's time would land in its parent's cutime
    all at once, so it is not counted), parent and start time, and the machine's busy/idle seconds."""

    processes: dict[int, tuple[str, int, float, int]]  # pid → (comm, ppid, CPU seconds, start time)
    busy: float
    idle: float
    children: float  # this process's reaped children (the docker CLI runs)

    @classmethod
    def take(cls) -> CpuSnapshot:
        import resource

        processes: dict[int, tuple[str, int, float, int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                text = (entry / "stat").read_text()
                comm = text[text.index("(") + 1 : text.rindex(")")]
                rest = text[text.rindex(")") + 2 :].split()
                cpu = (int(rest[11]) + int(rest[12])) / _TICK
                processes[int(entry.name)] = (comm, int(rest[1]), cpu, int(rest[19]))
        ticks = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        idle = (ticks[3] + ticks[4]) / _TICK
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(processes, sum(ticks) / _TICK - idle, idle, usage.ru_utime + usage.ru_stime)


def _group(pid: int, processes: dict[int, tuple[str, int, float, int]], stack_pid: int | None) -> str:
    if pid == os.getpid():
        return "bench driver"
    if pid == stack_pid:
        return "local stack process (gateway, moto, pollers)"
    current, hops = pid, 0
    while current > 1 and current in processes and hops < 64:
        comm, parent, _, _ = processes[current]
        if current == stack_pid:
            return "local stack function environments"
        if comm.startswith(_DOCKER):
            return "docker engine (dockerd, containerd, shims)"
        if current == os.getpid():
            return "bench driver"
        current, hops = parent, hops + 1
    return "other processes on the machine"


def cpu_by_group(before: CpuSnapshot, after: CpuSnapshot, stack_pid: int | None) -> dict[str, Any]:
    """CPU seconds each group used between the snapshots, and the machine's busy share."""
    groups: dict[str, float] = {}
    for pid, (_, _, cpu, started) in after.processes.items():
        previous = before.processes.get(pid)
        used = cpu - previous[2] if previous is not None and previous[3] == started else cpu
        name = _group(pid, after.processes, stack_pid)
        groups[name] = groups.get(name, 0.0) + max(0.0, used)
    children = after.children - before.children
    if children > 0:
        groups["bench driver's exited children (docker CLI)"] = children
    busy = after.busy - before.busy
    groups["exited processes (runc, shims; not attributable)"] = max(0.0, busy - sum(groups.values()))
    wall = (after.busy + after.idle) - (before.busy + before.idle)
    return {
        "busy_share": round(busy / wall, 3) if wall else None,
        "busy_cpu_seconds": round(busy, 2),
        "by_group_cpu_seconds": {name: round(value, 2) for name, value in sorted(groups.items())},
    }


def function_lines(log_path: Path, offset: int = 0) -> Iterator[tuple[str, str]]:
    """(function, line) for each line the local stack's functions printed since `offset` (`[NameFunction] ...`)."""
    with log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("[") and "] " in line:
            function, rest = line[1:].split("] ", 1)
            if function.endswith("Function"):
                yield function, rest


def emf_documents(log_path: Path, offset: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """(function, document) for each JSON line (log line or EMF document) the functions printed."""
    for function, line in function_lines(log_path, offset):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                yield function, json.loads(line)
