"""Operating the service through the public API and `leasectl`, on the local stack: a real container's logs,
a RunPod pod's logs, and releasing every lease of one owner on both providers while another owner's stay."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack

H100 = "NVIDIA H100 80GB HBM3"
LEASECTL = (sys.executable, "-m", "openalice_scheduler_client.cli")
CLIENT_SRC = Path(__file__).resolve().parents[2] / "client" / "src"


def cli_env(**extra: str) -> dict[str, str]:
    """leasectl's environment, the client package from the tree (not installed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SCHEDULER_URL", "INTERNAL_SECRET", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join([str(CLIENT_SRC), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def leasectl(stack: RunningStack, *argv: str) -> subprocess.CompletedProcess[str]:
    """`leasectl` as a process, configured through the environment as a user would."""
    return subprocess.run(
        [*LEASECTL, *argv],
        env=cli_env(SCHEDULER_URL=stack.url, INTERNAL_SECRET=stack.secret, NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def print_in(docker_client: Any, container_id: str, *lines: str) -> None:
    """What the container's main process prints: its stdout is what the engine logs."""
    script = "".join(f"echo '{line}' > /proc/1/fd/1; " for line in lines)
    assert docker_client.containers.get(container_id).exec_run(["sh", "-c", script]).exit_code == 0


def acquired(stack: RunningStack, **body: Any) -> dict[str, Any]:
    response = stack.acquire(ttl_seconds=600, **body)
    assert response.status_code == 201, response.text
    return dict(response.json()["lease"])


def containers_of(docker_client: Any, lease_id: str) -> list[Any]:
    return docker_client.containers.list(all=True, filters={"label": f"openalice.scheduler/lease-id={lease_id}"})


# --- a real container's logs -----------------------------------------------------------------------


def test_the_logs_of_a_real_container_through_the_api(stack: RunningStack, docker_client: Any) -> None:
    lease = acquired(stack, owner_id="logs-api")
    print_in(docker_client, lease["provider_token"], "loading scene intro", "frame 1 rendered", "frame 2 rendered")

    response = stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner="logs-api", params={"tail": "2"})

    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain")
    assert response.text == "frame 1 rendered\nframe 2 rendered\n"
    assert response.headers["X-Lease-Status"] == "active"


def test_the_logs_of_a_real_container_with_timestamps_resume_from_a_time(
    stack: RunningStack, docker_client: Any
) -> None:
    lease = acquired(stack, owner_id="logs-api")
    print_in(docker_client, lease["provider_token"], "first", "second")
    path = f"/v1/lease/{lease['lease_id']}/logs"
    stamped = stack.request("GET", path, owner="logs-api", params={"timestamps": "true"}).text.splitlines()
    since = stamped[-1].split(" ", 1)[0]
    print_in(docker_client, lease["provider_token"], "third")

    later = stack.request("GET", path, owner="logs-api", params={"since": since})

    assert later.text == "second\nthird\n"


def test_the_logs_of_another_owners_lease_are_refused(stack: RunningStack) -> None:
    lease = acquired(stack, owner_id="logs-api")
    response = stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner="someone-else")
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")


def test_the_logs_of_a_released_lease_are_gone(stack: RunningStack) -> None:
    lease = acquired(stack, owner_id="logs-api")
    assert stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="logs-api").status_code == 204
    response = stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner="logs-api")
    assert (response.status_code, response.json()["error"]["code"]) == (410, "gone")


def test_the_logs_of_an_unknown_lease_are_404(stack: RunningStack) -> None:
    response = stack.request("GET", "/v1/lease/3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42/logs")
    assert response.status_code == 404


def test_leasectl_logs_print_a_real_containers_output(stack: RunningStack, docker_client: Any) -> None:
    lease = acquired(stack, owner_id="logs-cli")
    print_in(docker_client, lease["provider_token"], "hello from the worker", "render finished")

    result = leasectl(stack, "logs", lease["lease_id"], "--owner", "logs-cli", "--tail", "10")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from the worker\nrender finished\n"


def test_leasectl_logs_follow_ends_when_the_lease_is_released(stack: RunningStack, docker_client: Any) -> None:
    lease = acquired(stack, owner_id="logs-cli")
    print_in(docker_client, lease["provider_token"], "before")
    follower = subprocess.Popen(
        [*LEASECTL, "logs", lease["lease_id"], "--owner", "logs-cli", "--follow", "--interval", "0.3"],
        env=cli_env(SCHEDULER_URL=stack.url, INTERNAL_SECRET=stack.secret),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "before\n"
        print_in(docker_client, lease["provider_token"], "after")
        assert follower.stdout.readline() == "after\n"
        assert stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="logs-cli").status_code == 204
        assert follower.wait(30) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
    assert "no more output" in (follower.stderr.read() if follower.stderr else "")


# --- releasing everything an owner holds: local-docker ---------------------------------------------


def test_releasing_an_owners_leases_removes_their_containers_and_leaves_another_owners(
    stack: RunningStack, docker_client: Any
) -> None:
    mine = {acquired(stack, owner_id="restarting-svc")["lease_id"] for _ in range(3)}
    theirs = acquired(stack, owner_id="other-svc")

    response = stack.request("DELETE", "/v1/leases", owner="restarting-svc", params={"owner_id": "restarting-svc"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert {lease["lease_id"] for lease in body["released"]} == mine
    assert (body["not_released"], body["next_token"]) == ([], None)
    assert all(containers_of(docker_client, lease_id) == [] for lease_id in mine)
    assert [container.status for container in containers_of(docker_client, theirs["lease_id"])] == ["running"]
    assert stack.request("GET", f"/v1/lease/{theirs['lease_id']}").json()["lease"]["status"] == "active"


def test_releasing_an_owners_leases_with_another_owner_header_is_refused(stack: RunningStack) -> None:
    lease = acquired(stack, owner_id="guarded-svc")
    response = stack.request("DELETE", "/v1/leases", owner="intruder", params={"owner_id": "guarded-svc"})
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")
    assert stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]["status"] == "active"


def test_leasectl_release_all_releases_three_leases_and_another_owners_stays(
    stack: RunningStack, docker_client: Any
) -> None:
    mine = {acquired(stack, owner_id="cli-owner")["lease_id"] for _ in range(3)}
    theirs = acquired(stack, owner_id="cli-other")

    result = leasectl(stack, "release", "--owner", "cli-owner", "--all")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "released 3 leases of cli-owner"
    assert {line.split()[1] for line in result.stdout.splitlines()[:-1]} == mine
    listed = leasectl(stack, "--json", "list", "--owner", "cli-other")
    assert theirs["lease_id"] in listed.stdout
    assert containers_of(docker_client, theirs["lease_id"])


# --- RunPod ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runpod() -> Iterator[FakeRunPod]:
    with start_fake_runpod("ops-key", {"tpl-renderer": {"ports": ["8080/http"]}}) as server:
        yield server


@pytest.fixture(scope="module")
def runpod_stack(
    docker_host: Any, runpod: FakeRunPod, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("ops-runpod"),
        docker_env=docker_host.env(),
        extra_env={
            "PROVIDERS": "runpod,local-docker",
            "RUNPOD_API_URL": runpod.url,
            "RUNPOD_API_KEY": "ops-key",
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_ANIM_TEMPLATE": "tpl-renderer",
            "RUNPOD_GPU_TYPES_HIGH": H100,
            "SWEEP_INTERVAL_SECONDS": "1",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def test_releasing_an_owners_pods_deletes_them_and_leaves_another_owners(
    runpod_stack: RunningStack, runpod: FakeRunPod
) -> None:
    mine = [acquired(runpod_stack, owner_id="gpu-restarting", gpu="high") for _ in range(3)]
    theirs = acquired(runpod_stack, owner_id="gpu-other", gpu="high")
    assert {lease["provider"] for lease in [*mine, theirs]} == {"runpod"}

    response = runpod_stack.request(
        "DELETE", "/v1/leases", owner="gpu-restarting", params={"owner_id": "gpu-restarting"}
    )

    assert response.status_code == 200, response.text
    assert {lease["lease_id"] for lease in response.json()["released"]} == {lease["lease_id"] for lease in mine}
    live_pods = set(runpod.pods)
    assert all(lease["provider_token"] not in live_pods for lease in mine)
    assert theirs["provider_token"] in live_pods


def test_the_logs_of_a_pod_through_the_api(runpod_stack: RunningStack, runpod: FakeRunPod) -> None:
    lease = acquired(runpod_stack, owner_id="gpu-logs", gpu="high")
    runpod.append_pod_log(lease["provider_token"], "CUDA ready", "frame 1 rendered")

    response = runpod_stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner="gpu-logs")

    assert response.status_code == 200, response.text
    worker_lines = [line for line in response.text.splitlines() if not line.startswith("[system] ")]
    assert worker_lines[-2:] == ["CUDA ready", "frame 1 rendered"]  # RunPod's boot lines may come between
    assert "[system] " in response.text  # RunPod's own lines about the pod, marked


def test_the_logs_of_a_deleted_pod_are_gone(runpod_stack: RunningStack) -> None:
    lease = acquired(runpod_stack, owner_id="gpu-logs", gpu="high")
    assert runpod_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="gpu-logs").status_code == 204
    response = runpod_stack.request("GET", f"/v1/lease/{lease['lease_id']}/logs", owner="gpu-logs")
    assert (response.status_code, response.json()["error"]["code"]) == (410, "gone")
