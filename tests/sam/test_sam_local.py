"""The functions through SAM's own emulator: `sam build`, `sam local invoke`, `sam local start-api`.

What a SAM user runs (docs/sam-local.md), on the local parts of `make sam-local`: the embedded DynamoDB
with the template's tables, the TLS Docker host, the Lambda base image stand-in. The acquire creates a
real container on the TLS Docker host and the release removes it; the events are the files in events/.
Bounded: every SAM call has a timeout, and the module as a whole stays within a few minutes on a cold
machine (the base image build is most of it, about a minute, and cached afterwards).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.sam.conftest import REPO, SAM, require_sam_local, runtime_python_dir

pytestmark = pytest.mark.timeout(420)

EVENTS = REPO / "events"
SAMPLE_LEASE_ID = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
SECRET = "sam-local-test-secret"
READY_TIMEOUT_SECONDS = 300.0  # a cold machine builds the base image first (about a minute)
INVOKE_TIMEOUT_SECONDS = 120


@dataclass
class SamLocal:
    """`python -m devstack.sam_local` running, and the built template."""

    process: subprocess.Popen[bytes]
    state_dir: Path
    log_path: Path
    build_dir: Path

    @property
    def env_vars(self) -> Path:
        return self.state_dir / "env.json"

    def environment(self) -> dict[str, str]:
        """What scripts/sam runs with: the parts' state dir, and python3.13 on PATH for `sam build`."""
        python_dir = runtime_python_dir()
        # DOCKER_* and AWS_* come from the parts' sam.env only (scripts/sam keeps what is already set).
        inherited = {key: value for key, value in os.environ.items() if not key.startswith(("DOCKER_", "AWS_"))}
        return {
            **inherited,
            "SAM_LOCAL_STATE_DIR": str(self.state_dir),
            "PATH": f"{python_dir}:{os.environ.get('PATH', '')}",
        }

    def sam(self, *arguments: str, timeout: float = INVOKE_TIMEOUT_SECONDS) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SAM), *arguments],
            cwd=REPO,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def invoke(self, function: str, event: Path) -> dict[str, Any]:
        """`sam local invoke` with samconfig.toml's [default.local_invoke] settings; the function's answer."""
        started = time.monotonic()
        result = self.sam(
            "local",
            "invoke",
            function,
            "--template",
            str(self.build_dir / "template.yaml"),
            "--config-file",
            str(REPO / "samconfig.toml"),
            "--event",
            str(event),
            "--env-vars",
            str(self.env_vars),
            # Also in samconfig.toml; repeated so that no change there can make the engine ask a registry.
            "--skip-pull-image",
        )
        assert result.returncode == 0, f"sam local invoke {function} failed:\n{result.stderr[-4000:]}"
        print(f"sam local invoke {function}: {time.monotonic() - started:.1f} s\n{result.stderr[-1500:]}")
        answer: dict[str, Any] = json.loads(result.stdout)
        return answer

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def sam_local(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamLocal]:
    """`make sam-local` on the session's TLS Docker host, and `sam build` into a directory of its own."""
    require_sam_local()
    state_dir = tmp_path_factory.mktemp("sam-local")
    log_path = state_dir / "sam-local.log"
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devstack.sam_local",
                "--state-dir",
                str(state_dir),
                "--docker-state-dir",
                str(docker_host.state_dir),
            ],
            cwd=REPO,
            env={**os.environ, "INTERNAL_SECRET": SECRET, "PYTHONPATH": str(REPO)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    running = SamLocal(process, state_dir, log_path, tmp_path_factory.mktemp("sam-build"))
    try:
        while "[sam-local] ready" not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() - started > READY_TIMEOUT_SECONDS:
                pytest.fail(f"make sam-local did not get ready:\n{log_path.read_text(errors='replace')[-4000:]}")
            time.sleep(0.5)
        print(f"sam-local ready in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        # --no-cached: a cached build keeps the layer's dependencies in ./.aws-sam/deps, the developer's.
        build = running.sam("build", "--build-dir", str(running.build_dir), "--no-cached", timeout=300)
        assert build.returncode == 0, f"sam build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
        print(f"sam build in {time.monotonic() - started:.1f} s")
        yield running
    finally:
        running.stop()


def _event_for(tmp_path: Path, name: str, lease_id: str) -> Path:
    """An events/ file with the sample lease id replaced by a real one."""
    path = tmp_path / name
    path.write_text((EVENTS / name).read_text().replace(SAMPLE_LEASE_ID, lease_id))
    return path


def test_health_through_sam_local_invoke(sam_local: SamLocal) -> None:
    answer = sam_local.invoke("HealthFunction", EVENTS / "health.json")

    assert answer["statusCode"] == 200
    assert json.loads(answer["body"]) == {"status": "ok", "service": "openalice-scheduler"}


def test_acquire_creates_a_container_and_release_removes_it(
    sam_local: SamLocal, docker_client: Any, tmp_path: Path
) -> None:
    acquired = sam_local.invoke("AcquireLeaseFunction", EVENTS / "acquire_lease.json")

    assert acquired["statusCode"] == 201, acquired
    lease = json.loads(acquired["body"])["lease"]
    assert lease["status"] == "active"
    assert lease["provider"] == "local-docker"
    workers = docker_client.containers.list(filters={"name": f"lease-{lease['lease_id']}"})
    assert [worker.status for worker in workers] == ["running"]

    released = sam_local.invoke("ReleaseLeaseFunction", _event_for(tmp_path, "release_lease.json", lease["lease_id"]))

    assert released["statusCode"] == 204, released
    assert not docker_client.containers.list(all=True, filters={"name": f"lease-{lease['lease_id']}"})


def test_start_api_answers_through_the_authorizer(sam_local: SamLocal, docker_client: Any) -> None:
    port = _free_port()
    log_path = sam_local.state_dir / "start-api.log"
    with log_path.open("wb") as log:
        api = subprocess.Popen(
            [
                str(SAM),
                "local",
                "start-api",
                "--template",
                str(sam_local.build_dir / "template.yaml"),
                "--config-file",
                str(REPO / "samconfig.toml"),
                "--env-vars",
                str(sam_local.env_vars),
                "--port",
                str(port),
                "--skip-pull-image",
            ],
            cwd=REPO,
            env=sam_local.environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        health = _wait_for(f"{url}/health", api, log_path)
        assert health.status_code == 200
        assert health.json()["status"] == "ok"

        listed = requests.get(f"{url}/v1/leases", headers={"X-Internal-Secret": SECRET}, timeout=60)
        assert listed.status_code == 200, listed.text
        assert listed.json()["leases"] == []
        assert requests.get(f"{url}/v1/leases", timeout=60).status_code == 401
        refused = requests.get(f"{url}/v1/leases", headers={"X-Internal-Secret": "wrong"}, timeout=60)
        assert refused.status_code == 403
    finally:
        os.killpg(api.pid, signal.SIGTERM)
        try:
            api.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(timeout=10)
        print(log_path.read_text(errors="replace")[-3000:])
    # SAM removes its function containers when it stops.
    assert not docker_client.containers.list(all=True, filters={"label": "sam.cli.container.type=lambda"})


def _wait_for(url: str, process: subprocess.Popen[bytes], log_path: Path, timeout: float = 90.0) -> requests.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sam local start-api exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            return requests.get(url, timeout=60)
        except requests.ConnectionError:
            time.sleep(0.3)
    pytest.fail(f"sam local start-api did not answer within {timeout} s:\n{log_path.read_text()[-4000:]}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
