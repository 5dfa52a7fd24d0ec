"""scripts/smoke, the post-deploy check, run here against the local stack (`make run`): the same API.

Against the deployed API it is the operator's to run (docs/deploy.md); here it must not rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

from tests.sam.conftest import REPO
from tests.support.stack import RunningStack

SCRIPT = REPO / "scripts" / "smoke"


def test_smoke_acquires_lists_and_releases(stack: RunningStack, docker_client: Any) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--url", stack.url],
        env={**os.environ, "INTERNAL_SECRET": stack.secret},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("ok   POST /v1/lease", "ok   GET /v1/leases?owner_id=...", "ok   DELETE /v1/lease/{id}"):
        assert line in result.stdout
    assert "passed in" in result.stdout
    lease_id = re.search(r"lease ([0-9a-f-]{36}) on local-docker", result.stdout).group(1)  # type: ignore[union-attr]
    assert not docker_client.containers.list(all=True, filters={"name": f"lease-{lease_id}"})


def test_smoke_fails_and_says_so_on_a_wrong_secret(stack: RunningStack) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--url", stack.url],
        env={**os.environ, "INTERNAL_SECRET": "not-the-secret"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 1
    assert "FAIL POST /v1/lease: HTTP 403" in result.stdout
