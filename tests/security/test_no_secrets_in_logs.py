"""No secret reaches a log line or a response: the internal secret, the RunPod API key, a wrong secret a
caller sent, and the values callers pass in a lease's `env` (worker credentials, often).

One local stack (`make run`) on the TLS Docker host and the fake RunPod, logging at DEBUG (the most any
deployment can log: LogLevel's widest setting), driven through every path a request or a schedule
takes: acquire on Docker and on RunPod, list, get, renew, release, a refused secret, a missing one,
a 402 from RunPod, a bad body, and an expiry ended by the sweep. Then everything the stack and its
functions printed, every file it left in its state directory, and every response (bodies and headers)
are searched for each secret.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
H100 = "NVIDIA H100 80GB HBM3"


def _distinctive(label: str) -> str:
    """A value no log line could contain by chance: a label and 32 random hex digits."""
    return f"{label}-{secrets.token_hex(16)}"


@dataclass(frozen=True)
class Secrets:
    internal: str = field(default_factory=lambda: _distinctive("internal-secret"))
    runpod_key: str = field(default_factory=lambda: _distinctive("runpod-key"))
    wrong: str = field(default_factory=lambda: _distinctive("wrong-secret"))
    docker_env: str = field(default_factory=lambda: _distinctive("docker-env-value"))
    runpod_env: str = field(default_factory=lambda: _distinctive("runpod-env-value"))
    refused_env: str = field(default_factory=lambda: _distinctive("refused-env-value"))
    expiring_env: str = field(default_factory=lambda: _distinctive("expiring-env-value"))
    invalid_env: str = field(default_factory=lambda: _distinctive("invalid-env-value"))

    def named(self) -> dict[str, str]:
        return dict(vars(self))


WINDOW = 12  # 12 random hex digits: no chance match (16**12), yet a truncated or sliced copy is caught


def _needles(value: str) -> set[str]:
    """The value, and every 12-digit slice of its random part (so a partial or re-quoted copy matches)."""
    random_part = value.rsplit("-", 1)[1]
    return {value} | {random_part[start : start + WINDOW] for start in range(len(random_part) - WINDOW + 1)}


def _leaks(haystack: str, values: dict[str, str]) -> list[str]:
    return sorted(name for name, value in values.items() if any(needle in haystack for needle in _needles(value)))


@dataclass
class Flow:
    """What the test saw: every response, for the body and header checks."""

    responses: list[requests.Response] = field(default_factory=list)

    def keep(self, response: requests.Response) -> requests.Response:
        self.responses.append(response)
        return response


@pytest.fixture(scope="module")
def values() -> Secrets:
    return Secrets()


@pytest.fixture(scope="module")
def fake(values: Secrets) -> Iterator[FakeRunPod]:
    with start_fake_runpod(values.runpod_key, {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as server:
        yield server


@pytest.fixture(scope="module")
def stack(
    docker_host: Any, fake: FakeRunPod, values: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("no-secrets"),
        docker_env=docker_host.env(),
        extra_env={
            "INTERNAL_SECRET": values.internal,
            "PROVIDERS": "local-docker,runpod",
            "RUNPOD_API_URL": fake.url,
            "RUNPOD_API_KEY": values.runpod_key,
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
            "RUNPOD_GPU_TYPES_HIGH": H100,
            "SWEEP_INTERVAL_SECONDS": "1",
            # The reconciler lists pods with the key too: run it often enough to be in the logs.
            "RECONCILE_INTERVAL_SECONDS": "2",
            "LOG_LEVEL": "DEBUG",
            "POWERTOOLS_LOG_LEVEL": "DEBUG",
            "POWERTOOLS_DEBUG": "true",
        },
    )
    running.secret = values.internal
    yield running
    running.stop()


def _run_every_path(stack: RunningStack, fake: FakeRunPod, values: Secrets) -> Flow:
    flow = Flow()
    owner = "secrets-owner"

    # acquire: a container on the Docker host, then a pod on RunPod, each with a credential in env.
    docker = flow.keep(stack.acquire(gpu="none", owner_id=owner, env={"API_TOKEN": values.docker_env}))
    assert docker.status_code == 201, docker.text
    assert docker.json()["provider"] == "local-docker"
    docker_id = docker.json()["lease"]["lease_id"]

    pod = flow.keep(stack.acquire(gpu="high", owner_id=owner, env={"HF_TOKEN": values.runpod_env}))
    assert pod.status_code == 201, pod.text
    assert pod.json()["provider"] == "runpod"
    pod_id = pod.json()["lease"]["lease_id"]
    (created,) = fake.requests_to("POST", "/v2/pods")
    assert created["authorized"] and created["body"]["env"]["HF_TOKEN"] == values.runpod_env  # it did travel

    # an idempotent acquire, made and replayed: the idempotency record keeps a hash of the body only.
    replay_key = _distinctive("idempotency-key")
    idempotent = [
        flow.keep(
            stack.request(
                "POST",
                "/v1/lease",
                headers={"Idempotency-Key": replay_key},
                json={"kind": "renderer", "owner_id": owner, "env": {"API_TOKEN": values.docker_env}},
            )
        )
        for _ in range(2)
    ]
    assert [response.status_code for response in idempotent] == [201, 201], idempotent[-1].text
    replayed = {response.json()["lease"]["lease_id"] for response in idempotent}

    # read, renew, release.
    listed = flow.keep(stack.request("GET", "/v1/leases", params={"owner_id": owner}))
    assert listed.status_code == 200 and {lease["lease_id"] for lease in listed.json()["leases"]} >= {
        docker_id,
        pod_id,
    }
    for lease_id in (docker_id, pod_id):
        assert flow.keep(stack.request("GET", f"/v1/lease/{lease_id}")).status_code == 200
    renewed = flow.keep(stack.request("POST", f"/v1/lease/{docker_id}/renew", owner=owner, json={"ttl_seconds": 900}))
    assert renewed.status_code == 200, renewed.text
    for lease_id in (pod_id, docker_id, *replayed):
        released = flow.keep(stack.request("DELETE", f"/v1/lease/{lease_id}", owner=owner))
        assert released.status_code == 204, released.text
    assert pod.json()["lease"]["provider_token"] in fake.deleted_pod_ids

    # the authorizer: a wrong secret (403) and none at all (401).
    wrong = flow.keep(stack.request("GET", "/v1/leases", secret=values.wrong))
    assert wrong.status_code == 403, wrong.text
    missing = flow.keep(stack.request("GET", "/v1/leases", secret=""))
    assert missing.status_code == 401, missing.text

    # RunPod answers 402: the caller gets 502 provider_error.
    fake.configure(insufficient_balance=True)
    refused = flow.keep(stack.acquire(gpu="high", owner_id="broke", env={"HF_TOKEN": values.refused_env}))
    fake.configure(insufficient_balance=False)
    assert refused.status_code == 502, refused.text
    assert refused.json()["error"]["code"] == "provider_error"

    # a body the API refuses, with a credential in it: neither echoed nor logged.
    invalid = flow.keep(stack.acquire(gpu="none", env={"bad-key": values.invalid_env, "OK": values.invalid_env}))
    assert invalid.status_code == 400, invalid.text
    not_json = flow.keep(
        stack.request(
            "POST",
            "/v1/lease",
            data=f'{{"kind":"renderer","env":{{"TOKEN":"{values.invalid_env}"',
            headers={"Content-Type": "application/json"},
        )
    )
    assert not_json.status_code == 400, not_json.text

    # expiry: a short RunPod lease is ended by the sweep, its pod terminated with the key.
    expiring = flow.keep(stack.acquire(gpu="high", ttl_seconds=2, env={"HF_TOKEN": values.expiring_env}))
    assert expiring.status_code == 201, expiring.text
    expiring_lease = expiring.json()["lease"]
    wait_for(
        lambda: expiring_lease["provider_token"] in fake.deleted_pod_ids, timeout=30, what="the sweep ending the pod"
    )

    def expired() -> bool:
        answer = flow.keep(stack.request("GET", f"/v1/lease/{expiring_lease['lease_id']}"))
        return bool(answer.json()["lease"]["status"] == "expired")

    wait_for(expired, timeout=15, what="the lease recorded as expired")
    # Let the reconciler list RunPod's pods at least once more.
    wait_for(lambda: len(fake.requests_to("GET", "/v2/pods")) >= 2, timeout=15, what="a reconcile pass")
    return flow


def _files_under(directory: Path) -> Iterator[tuple[Path, str]]:
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.stat().st_size < 50_000_000:
            yield path, path.read_bytes().decode("utf-8", errors="replace")


def test_no_secret_in_logs_responses_or_state(stack: RunningStack, fake: FakeRunPod, values: Secrets) -> None:
    flow = _run_every_path(stack, fake, values)
    stack.stop()  # flush and include the shutdown lines
    logs = stack.logs()

    # The logs are real: each kind of function spoke, the authorizer's refusal and DEBUG lines included.
    for expected in (
        "[AuthorizerFunction]",
        "request refused by authorizer",
        "[AcquireLeaseFunction]",
        "lease acquired",
        "[ReleaseLeaseFunction]",
        "[SweepExpiredFunction]",
        "[ReconcileWorkersFunction]",
        "insufficient account balance",
        "[DEBUG]",  # POWERTOOLS_DEBUG: powertools' own debug lines (idempotency, batch, logger) are on
    ):
        assert expected in logs, f"{expected!r} not in the stack's output: the search below would prove nothing"

    everything = values.named()
    leaked = _leaks(logs, everything)
    assert not leaked, f"in the stack's logs: {leaked}\n" + "\n".join(
        line for line in logs.splitlines() if _leaks(line, everything)
    )

    for path, text in _files_under(stack.state_dir):
        assert not _leaks(text, everything), f"{path} holds {_leaks(text, everything)}"

    # Responses: env values and keys are never echoed (the caller's own secret is not either).
    for response in flow.responses:
        shown = response.text + json.dumps(dict(response.headers))
        leaked = _leaks(shown, everything)
        assert not leaked, f"{response.request.method} {response.url} → {response.status_code} shows {leaked}"


@pytest.mark.parametrize("function", ["authorizer", "get_lease"])
def test_event_logging_switched_on_still_logs_no_secret(function: str) -> None:
    secret = _distinctive("header-secret")
    event = json.loads((REPO / "events" / f"{function}.json").read_text())
    event["headers"]["x-internal-secret"] = secret
    if "identitySource" in event:
        event["identitySource"] = [secret]
    script = (
        "import json, sys\n"
        "from devstack.lambda_environment import LambdaContext\n"
        f"from functions.{function}.app import lambda_handler\n"
        "context = LambdaContext(function_name='f', memory_limit_in_mb=128, aws_request_id='r',"
        " deadline_epoch_ms=2**62)\n"
        "print(json.dumps(lambda_handler(json.loads(sys.stdin.read()), context)))\n"
    )
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "layers" / "scheduler"), str(REPO)]),
        "POWERTOOLS_LOGGER_LOG_EVENT": "true",
        "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
        "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler",
        "INTERNAL_SECRET": _distinctive("expected"),
        "LEASES_TABLE": "no-such-table",
        # Nothing listens on port 9: a store call fails at once (the event is logged before it).
        "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert secret not in output, f"{function} logged the X-Internal-Secret header it was given"
