"""The runtime: each part built from the settings when first used or given by a test in one line, and the
context it hands every use case for one invocation."""

from __future__ import annotations

import gc
import math
from typing import Any

import pytest

from scheduler.callers.model import SHARED_SECRET
from scheduler.config import Settings
from scheduler.deadline import Deadline
from scheduler.limits import LeaseLimits
from scheduler.runtime import Runtime
from scheduler.store import LeaseStore

from .builders import NOW, memory_provider, registry_of


def test_the_context_carries_the_parts_given_and_the_invocations_deadline() -> None:
    store, registry, limits = (
        LeaseStore("leases", client=None),
        registry_of(memory_provider()),
        LeaseLimits(per_owner=1),
    )
    settings = Settings(providers=registry.names)
    deadline = Deadline.within(20)

    runtime = Runtime(settings, store=store, providers=registry, limits=limits, clock=lambda: NOW)
    ctx = runtime.context(deadline, SHARED_SECRET)

    assert (ctx.store, ctx.providers, ctx.settings, ctx.limits, ctx.deadline, ctx.caller) == (
        store,
        registry,
        settings,
        limits,
        deadline,
        SHARED_SECRET,
    )
    assert ctx.clock() == NOW


def test_a_context_without_a_deadline_has_no_limit() -> None:
    runtime = Runtime(Settings(), store=LeaseStore("leases", client=None), providers=registry_of(memory_provider()))

    assert runtime.context(None, SHARED_SECRET).deadline.remaining() == math.inf


def test_a_part_not_given_is_built_from_the_settings() -> None:
    runtime = Runtime(Settings(max_leases_per_owner=3, provider_caps={"local-docker": 2}))

    assert (runtime.limits.per_owner, dict(runtime.limits.provider_caps)) == (3, {"local-docker": 2})


def test_warming_a_part_the_runtime_does_not_have_is_refused() -> None:
    with pytest.raises(TypeError, match="unknown runtime part 'stores'"):
        Runtime(Settings()).warm("stores")  # type: ignore[arg-type]


def test_warming_freezes_what_init_made_and_leaves_the_collector_running() -> None:
    frozen_before = gc.get_freeze_count()

    Runtime(Settings(max_leases_per_owner=3)).warm("limits")

    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen_before


def test_a_refused_warm_leaves_the_collector_running() -> None:
    with pytest.raises(TypeError):
        Runtime(Settings()).warm("limits", "stores")  # type: ignore[arg-type]

    assert gc.isenabled()


def test_warming_leaves_a_collector_the_caller_paused_paused() -> None:
    gc.disable()
    try:
        Runtime(Settings()).warm("limits")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_idempotency_on_a_store_without_a_dynamodb_client_asks_for_its_own() -> None:
    elsewhere: Any = object()  # a lease store that is not DynamoDB's

    with pytest.raises(TypeError, match="idempotency="):
        _ = Runtime(Settings(), store=elsewhere).idempotency
