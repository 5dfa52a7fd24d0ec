"""A RunPod readiness check (what GET /v1/lease/{id} makes for a starting pod) keeps to its caller's deadline,
even when the account's shared request budget has no request left this minute."""

from __future__ import annotations

import time

import pytest

from scheduler.deadline import Deadline
from scheduler.models import GpuClass, WorkerKind
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from scheduler.providers.runpod.quota import LocalBudget, RequestBudget, account_key
from scheduler.store.api_budget import WindowState
from tests.fakes.runpod import start_fake_runpod

KEY = "runpod-key"


def test_a_readiness_check_gives_up_by_its_deadline_when_the_budget_is_short() -> None:
    with start_fake_runpod(KEY, {"tpl-renderer": {"ports": ["8080/http"]}}) as fake:
        shared = LocalBudget()
        now_ms = int(time.time() * 1000)
        # The account's whole minute is spent, and it resets in 12 s.
        shared._state[account_key(KEY)] = {
            "minute": WindowState(60, now_ms + 12_000, 0),
            "hour": WindowState(60, now_ms + 3_000_000, 0),
            "day": WindowState(60, now_ms + 80_000_000, 0),
        }
        driver = RunPodProvider(
            api=RunPodApi(fake.url, lambda: KEY, budget=RequestBudget(shared)),
            templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-renderer"},
            gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
            http_port=8080,
            retry=RetryPolicy(),
        )
        started = time.monotonic()
        with pytest.raises(ProviderRequestFailed):
            driver.readiness("lease", "pod-x", Deadline.within(2.0))
        assert time.monotonic() - started < 5
