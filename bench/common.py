"""What every benchmark shares: paths, the machine's description, percentiles, targets and result files.

Not a benchmark itself. The scripts import it as `bench.common` (each puts the repository on
sys.path first, so `python bench/<name>.py` works without PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
LAYER = REPO / "layers" / "scheduler"


def ensure_paths() -> None:
    """The repository (devstack, tests.support, bench) and the layer (scheduler) on sys.path."""
    for path in (str(LAYER), str(REPO)):
        if path not in sys.path:
            sys.path.insert(0, path)


# --- figures -------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); `values` need not be sorted."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float], digits: int = 2) -> dict[str, Any]:
    """count, min, p50, p95, p99, max and mean (None when empty)."""
    if not values:
        return {"count": 0, "min": None, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    return {
        "count": len(values),
        "min": round(min(values), digits),
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "p99": round(percentile(values, 99), digits),
        "max": round(max(values), digits),
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
        return {
            "name": self.name,
            "value": self.value,
            "limit": self.limit,
            "comparison": ">=" if self.at_least else "<=",
            "unit": self.unit,
            "holds": self.holds,
            "note": self.note,
        }


# --- the machine ---------------------------------------------------------------------------------


def load_average() -> list[float] | None:
    with contextlib.suppress(OSError, AttributeError):
        return [round(value, 2) for value in os.getloadavg()]
    return None


def machine() -> dict[str, Any]:
    """CPUs, model, memory, Python and the load average, as every result's context."""
    model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_mb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "memory_mb": memory_mb,
        "uname_m": platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": load_average(),
    }


class BusyMeter:
    """The share of the machine's CPU time that was busy between start and stop (all processes).

    Benchmarks on a shared machine report it, so a slow figure can be told apart from a busy box.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float] | None:
        try:
            ticks = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        except (OSError, ValueError):
            return None
        idle = ticks[3] + ticks[4]
        return float(sum(ticks) - idle), float(idle)

    def stop(self) -> dict[str, Any]:
        end = self._read()
        if self._start is None or end is None:
            return {}
        busy, idle = end[0] - self._start[0], end[1] - self._start[1]
        total = busy + idle
        return {"busy_share": round(busy / total, 3) if total else None, "load_average_after": load_average()}


# --- results -------------------------------------------------------------------------------------


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


def elapsed_since(started: float) -> float:
    return round(time.monotonic() - started, 1)
