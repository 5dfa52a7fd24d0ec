"""Every benchmark script runs end to end at tiny sizes (`bench/run_all.py --quick`) and writes its results.

These check that the scripts work, not the figures: `make bench` measures at full size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO

IN_PROCESS = ("cold_start", "round_trips", "overhead", "sweep_cost", "sweep_burst", "scale_out")
WITH_DOCKER = ("provisioning", "expiry_lag")


def run_quick(names: tuple[str, ...], results: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "bench" / "run_all.py"), "--quick", "--only", ",".join(names)]
    command += ["--results-dir", str(results)]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)


def result(results: Path, name: str) -> dict[str, Any]:
    return dict(json.loads((results / f"{name}.json").read_text()))


def test_in_process_benchmarks_run_and_write_results(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DOCKER_")}
    done = run_quick(IN_PROCESS, tmp_path, env)

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for name in IN_PROCESS:
        assert result(tmp_path, name)["targets"], name
    cold = result(tmp_path, "cold_start")
    assert {"venv", "lambda-bytecode"} <= set(cold["results"])
    assert cold["results"]["venv"]["get_lease"]["peak_rss_mb"] > 0
    assert cold["importtime"]["venv"]["get_lease"]["by_package_self_ms"]
    assert all(target["holds"] for target in result(tmp_path, "round_trips")["targets"])
    assert result(tmp_path, "overhead")["endpoints"]["acquire"]["overhead_ms"]["count"] == 3
    sweep = result(tmp_path, "sweep_cost")
    assert [run["handler_result"]["ended"] for run in sweep["runs"]] == [5, 5, 5, 5]
    burst = result(tmp_path, "sweep_burst")
    assert [run["workers_left"] for run in burst["runs"]] == [0, 0]
    assert burst["runs"][1]["hand_offs"] >= 2  # 20 due, 8 per invocation
    scale = result(tmp_path, "scale_out")
    assert scale["placement"]["placed"] == {"h0": 2, "h1": 2} and scale["placement"]["over_cap"] == 0
    assert [run["429s"] for run in scale["runpod"] if run["budget"]] == [0]
    summary = (tmp_path / "summary.md").read_text()
    assert "## Targets" in summary and "| round_trips | get: round trips | 1" in summary


def test_docker_benchmarks_run_and_leak_nothing(docker_host: Any, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DOCKER_")} | docker_host.env()
    done = run_quick(WITH_DOCKER, tmp_path, env)

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    provisioning = result(tmp_path, "provisioning")
    assert provisioning["leaks"] == {"managed_containers_left": 0, "raw_containers_left": 0}
    for concurrency in ("1", "8"):
        for mode in ("stack", "raw-cli", "raw-api"):
            assert provisioning["results"][concurrency][mode]["cycles_ok"] > 0, (concurrency, mode)
    expiry = result(tmp_path, "expiry_lag")
    assert expiry["leases_acquired"] == 4
    assert expiry["containers_removed"] == 4 and not expiry["not_removed"]
    assert expiry["final_statuses"] == {"expired": 4}


def test_the_event_delivery_benchmark_runs_and_delivers_every_transition(docker_host: Any, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DOCKER_")} | docker_host.env()
    done = run_quick(("event_delivery",), tmp_path, env)

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    delivery = result(tmp_path, "event_delivery")
    assert delivery["transitions_made"] == 20 and delivery["missing"] == 0 and delivery["all_verified"]


def test_the_fairness_benchmark_runs_in_memory_and_through_the_stack(docker_host: Any, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DOCKER_")} | docker_host.env()
    done = run_quick(("fairness",), tmp_path, env)

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    fairness = result(tmp_path, "fairness")
    assert fairness["memory"]["admissions"] == 40 and fairness["memory"]["order_violations"] == 0
    assert fairness["stack"]["admissions"] == 12 and fairness["stack"]["errors"] == {}
    assert fairness["stack"]["leaks"] == {"leases_left": 0, "managed_containers_left": 0}
    assert set(fairness["stack"]["shares"]) == {"anim", "live", "batch"} and len(fairness["targets"]) == 3
    assert "## Fairness" in (tmp_path / "summary.md").read_text()
