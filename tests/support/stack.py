"""Starting the local stack (`python -m devstack`) as a separate process, as `make run` does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import requests

REPO = Path(__file__).resolve().parents[2]
TEST_SECRET = "test-secret-0123456789"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RunningStack:
    """A local stack process and a small HTTP client for it."""

    process: subprocess.Popen[bytes]
    url: str
    secret: str
    log_path: Path
    state_dir: Path

    def request(
        self, method: str, path: str, *, secret: str | None = None, owner: str | None = None, **kwargs: Any
    ) -> requests.Response:
        """Call the API with the internal secret (pass secret="" to send none)."""
        headers = dict(kwargs.pop("headers", {}) or {})
        chosen = self.secret if secret is None else secret
        if chosen:
            headers["X-Internal-Secret"] = chosen
        if owner is not None:
            headers["X-Lease-Owner"] = owner
        return requests.request(method, self.url + path, headers=headers, timeout=60, **kwargs)

    def acquire(self, **body: Any) -> requests.Response:
        """POST /v1/lease with a JSON body (kind defaults to renderer)."""
        body.setdefault("kind", "renderer")
        return self.request("POST", "/v1/lease", json=body)

    def functions_env(self) -> dict[str, str]:
        """The environment the stack gives its functions (endpoints, table name)."""
        data = json.loads((self.state_dir / "functions.env.json").read_text())
        return dict(data["Parameters"])

    def dynamodb(self) -> Any:
        """A boto3 DynamoDB client on the stack's embedded DynamoDB."""
        env = self.functions_env()
        return boto3.client(
            "dynamodb",
            endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"],
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def lease_store(self) -> Any:
        """The service's own LeaseStore on the stack's table, to simulate crashes and races."""
        from scheduler.store import LeaseStore

        return LeaseStore(self.functions_env()["LEASES_TABLE"], self.dynamodb())

    def logs(self) -> str:
        """Everything the stack and its functions printed so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM the stack and wait for it to stop cleanly."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_stack(
    state_dir: Path,
    *,
    docker_env: dict[str, str],
    extra_env: dict[str, str] | None = None,
    ttl_lag_seconds: float = 3600.0,
    timeout: float = 60.0,
) -> RunningStack:
    """Start `python -m devstack` on a free port and wait until /health answers."""
    port = _free_port()
    env = {
        **os.environ,
        **docker_env,
        "INTERNAL_SECRET": TEST_SECRET,
        "PORT": str(port),
        "DEVSTACK_STATE_DIR": str(state_dir),
        "LOCAL_TTL_LAG_SECONDS": str(ttl_lag_seconds),
        "PYTHONPATH": str(REPO),
        "DEVSTACK_PERSIST": "0",  # a test's stack keeps nothing unless the test asks (DEVSTACK_PERSIST=1)
        **(extra_env or {}),
    }
    log_path = state_dir / "stack.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "devstack"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the local stack exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            if requests.get(url + "/health", timeout=2).status_code == 200 and "ready in" in log_path.read_text():
                return RunningStack(process, url, TEST_SECRET, log_path, state_dir)
        except (requests.ConnectionError, requests.Timeout):
            pass  # not listening yet, or a first health check slower than 2 s on a busy machine
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the local stack did not start in {timeout} s:\n{log_path.read_text()[-4000:]}")


def queue_stack_env(cap: int, notice_seconds: int, min_runtime_seconds: int) -> dict[str, str]:
    """A stack whose local-docker has `cap` slots, so that leases queue and preempt soon; a sweep every second."""
    return {
        "LOCAL_DOCKER_MAX_LEASES": str(cap),
        "SWEEP_INTERVAL_SECONDS": "1",
        "RECONCILE_INTERVAL_SECONDS": "3600",
        "MIN_RUNTIME_SECONDS": str(min_runtime_seconds),
        "PREEMPTION_NOTICE_SECONDS": str(notice_seconds),
    }
