"""bench/load.py end to end at smoke size: its own stack and Docker host, three cycles, nothing leaked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, require_docker


def test_load_smoke_run_leaks_nothing(tmp_path: Path) -> None:
    require_docker()
    # No DOCKER_* from the caller: the bench's stack starts (and stops) its own fresh TLS dev host,
    # so every managed container it counts afterwards is one this run could have leaked.
    env = {key: value for key, value in os.environ.items() if not key.startswith("DOCKER_")}
    results = tmp_path / "load.json"
    command = [sys.executable, str(REPO / "bench" / "load.py"), "--start-stack", "--cycles", "3", "--concurrency", "2"]
    command += ["--progress-seconds", "1", "--json", str(results), "--markdown", str(tmp_path / "load.md")]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(results.read_text())
    assert result["run"]["cycles_ok"] == 3 and result["run"]["complete"]
    assert result["errors"]["total"] == 0
    assert result["latency_ms"]["acquire"]["count"] == 3 and result["latency_ms"]["release"]["count"] == 3
    assert result["leaks"]["containers"] == 0, result["leaks"]
    assert result["leaks"]["leases"] == 0, result["leaks"]
    assert "done 3/3" in done.stdout
    assert "| acquire | 3 |" in (tmp_path / "load.md").read_text()
