"""The RunPod driver's `logs` against the fake: a 429 is waited out as RunPod asks, an open stream ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from scheduler.deadline import Deadline
from scheduler.models import GpuClass, WorkerKind
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from scheduler.worker_logs import LogQuery
from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.unit.builders import new_lease


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeRunPod]:
    with start_fake_runpod("logs-key", {"tpl": {"ports": ["8080/http"]}}) as server:
        yield server


def driver(fake: FakeRunPod, slept: list[float]) -> RunPodProvider:
    return RunPodProvider(
        api=RunPodApi(fake.url, lambda: "logs-key"),
        templates={WorkerKind.RENDERER: "tpl", WorkerKind.ANIM: "tpl"},
        gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
        http_port=8080,
        retry=RetryPolicy(sleep=slept.append, total_seconds=5, release_confirm_seconds=5),
    )


def pod(provider: RunPodProvider) -> str:
    now = datetime.now(UTC).replace(microsecond=0)
    return provider.provision(
        new_lease(provider="runpod", gpu=GpuClass.HIGH, ttl_seconds=600, created_at=now), {}
    ).token


def test_a_rate_limited_logs_request_is_asked_again_after_retry_after(fake: FakeRunPod) -> None:
    fake.reset()
    slept: list[float] = []
    provider = driver(fake, slept)
    token = pod(provider)
    fake.append_pod_log(token, "hello")
    fake.configure(rate_limit_next=1, rate_limit_retry_after=2)

    lines = provider.logs("any", token, LogQuery(tail=1))

    assert [line.text for line in lines] == ["hello"]
    assert slept == [2.0]


def test_rate_limited_logs_past_the_deadline_fail_naming_the_status(fake: FakeRunPod) -> None:
    fake.reset()
    provider = driver(fake, [])
    token = pod(provider)
    fake.configure(rate_limit_next=1, rate_limit_retry_after=30)
    with pytest.raises(ProviderRequestFailed, match="429"):
        provider.logs("any", token, LogQuery(tail=1), Deadline.within(10))


def test_the_open_log_stream_ends_soon_after_its_backfill(fake: FakeRunPod) -> None:
    fake.reset()
    provider = driver(fake, [])
    token = pod(provider)
    fake.append_pod_log(token, "one", "two")
    started = time.monotonic()
    lines = provider.logs("any", token, LogQuery(tail=100))  # fewer lines than asked: ends on a quiet stream
    assert [line.text for line in lines if line.source == "container"] == ["one", "two"]
    assert time.monotonic() - started < 5
