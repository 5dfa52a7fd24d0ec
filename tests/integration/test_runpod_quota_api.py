"""RunPod's request quota through the public API: acquires wait for the account's request budget when their
deadline leaves room for it, and are all granted; RunPod never has to answer 429."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack

H100 = "NVIDIA H100 80GB HBM3"
TWELVE_PER_TEN_SECONDS = '"ten";q=12;w=10'


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeRunPod]:
    with start_fake_runpod("quota-key", {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as server:
        server.configure(enforce_quota=True, rate_limit_policy=TWELVE_PER_TEN_SECONDS)
        yield server


@pytest.fixture(scope="module")
def stack(docker_host: Any, fake: FakeRunPod, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("runpod-quota"),
        docker_env=docker_host.env(),
        extra_env={
            "PROVIDERS": "runpod",
            "RUNPOD_API_URL": fake.url,
            "RUNPOD_API_KEY": "quota-key",
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
            "RUNPOD_GPU_TYPES_HIGH": H100,
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def _concurrent_acquires(stack: RunningStack, count: int, owner: str) -> list[tuple[int, float, str]]:
    """`count` gpu=high acquires at once: (status, seconds to answer, body) of each."""

    def timed(index: int) -> tuple[int, float, str]:
        started = time.monotonic()
        response = stack.acquire(gpu="high", owner_id=f"{owner}-{index}")
        return response.status_code, time.monotonic() - started, response.text[:300]

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(timed, range(count)))


def _report(what: str, answers: list[tuple[int, float, str]], fake: FakeRunPod) -> None:
    latencies = sorted(seconds for _, seconds, _ in answers)
    print(
        f"\n{what}: statuses {sorted(status for status, _, _ in answers)}, latency p50"
        f" {statistics.median(latencies):.1f} s, max {latencies[-1]:.1f} s; 429s {fake.rate_limited};"
        f" RunPod requests {len(fake.request_log)}"
    )


@pytest.mark.slow
def test_ten_concurrent_acquires_under_twelve_requests_per_ten_seconds_are_all_granted_without_a_429(
    stack: RunningStack, fake: FakeRunPod
) -> None:
    answers = _concurrent_acquires(stack, 10, "burst")

    _report("10 acquires at once, quota 12 per 10 s", answers, fake)
    assert [status for status, _, _ in answers] == [201] * 10, [text for status, _, text in answers if status != 201]
    assert fake.rate_limited == {"quota": 0, "forced": 0}


@pytest.mark.slow
def test_acquires_beyond_what_a_window_holds_wait_for_the_next_window_instead_of_being_refused(
    stack: RunningStack, fake: FakeRunPod
) -> None:
    assert stack.acquire(gpu="high", owner_id="first").status_code == 201  # the budget has seen RunPod's policy
    fake.clear_requests()

    # A window holds 10 creates (a fifth of 12 is kept for releases): at least 3 of these wait for the next.
    answers = _concurrent_acquires(stack, 12, "beyond")

    _report("12 acquires at once after 1, quota 12 per 10 s", answers, fake)
    assert [status for status, _, _ in answers] == [201] * 12, [text for status, _, text in answers if status != 201]
    assert fake.rate_limited == {"quota": 0, "forced": 0}
