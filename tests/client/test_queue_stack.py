"""The client's side of the queue through `make run` with a cap of 2 on the TLS Docker host: `leasectl acquire
--queue --wait` shows its place, its admission and its worker ready; `leasectl queue` lists the queue in order;
`leasectl get` shows a preemption notice with the priority it is for; `lease()` calls `on_preemption` once."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from openalice_scheduler_client import Lease, NotFound, SchedulerClient

from tests.client.test_cli import cli_env
from tests.support.stack import RunningStack, queue_stack_env, start_stack
from tests.support.waiting import wait_for

CAP = 2
NOTICE_SECONDS = 6
MIN_RUNTIME_SECONDS = 2


@pytest.fixture(scope="module")
def queue_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("queue-client"),
        docker_env=docker_host.env(),
        extra_env=queue_stack_env(CAP, NOTICE_SECONDS, MIN_RUNTIME_SECONDS),
    )
    yield running
    running.stop()


@pytest.fixture
def scheduler(queue_stack: RunningStack) -> Iterator[SchedulerClient]:
    """A client of the stack; every lease is released (queued ones cancelled) after each test."""
    with SchedulerClient(queue_stack.url, queue_stack.secret, timeout=60.0) as client:
        yield client
        wait_for(lambda: empty(client), 30, 0.2, "no live lease left")


def empty(client: SchedulerClient) -> bool:
    """Cancel the queued leases, then release the others (a release first would admit one); True once none is left.
    A lease being admitted meanwhile (pending) is left to the next round."""
    leases = sorted(client.list(), key=lambda lease: not lease.is_queued)
    for lease in leases:
        if lease.status != "pending":
            with contextlib.suppress(NotFound):
                client.release(lease.lease_id, owner_id=lease.owner_id)
    return not leases


def leasectl(stack: RunningStack, *argv: str) -> subprocess.Popen[str]:
    """`leasectl` as a process, configured through the environment as a user would."""
    return subprocess.Popen(
        [sys.executable, "-m", "openalice_scheduler_client.cli", *argv],
        env=cli_env(SCHEDULER_URL=stack.url, INTERNAL_SECRET=stack.secret),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def fill(scheduler: SchedulerClient) -> list[Lease]:
    return [scheduler.acquire("renderer", ttl_seconds=600, owner_id=f"holder-{n}") for n in range(CAP)]


def test_acquire_queue_wait_shows_the_place_the_admission_and_the_ready_worker(
    queue_stack: RunningStack, scheduler: SchedulerClient
) -> None:
    holders = fill(scheduler)
    ahead = scheduler.acquire("renderer", ttl_seconds=600, owner_id="urgent", queue_seconds=600, priority=90)
    waiting = leasectl(queue_stack, "acquire", "--kind", "renderer", "--owner", "cli", "--queue", "10m", "--wait")
    assert waiting.stderr is not None
    first = waiting.stderr.readline()  # the 202's place, before anything frees
    scheduler.release(ahead.lease_id, owner_id="urgent")  # the lease ahead is cancelled: one place up
    second = waiting.stderr.readline()  # shown at the next poll (every 5 s at most)
    scheduler.release(holders[0].lease_id, owner_id="holder-0")

    out, rest = waiting.communicate(timeout=60)

    lines = [first, second, *rest.splitlines()]
    print("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    lease_id = out.split()[1]
    assert waiting.returncode == 0 and "status          active" in out
    states = [line.removeprefix(f"lease {lease_id}: ").rsplit(" (", 1)[0] for line in lines]
    assert states[0].startswith("queued at position 2 (every provider is at its lease cap")
    assert states[1] == "queued at position 1"
    assert states[2].startswith("admitted after ") and states[-1] == "worker ready"
    assert scheduler.get(lease_id).admitted_at is not None


def test_leasectl_queue_lists_the_queue_in_admission_order(
    queue_stack: RunningStack, scheduler: SchedulerClient
) -> None:
    fill(scheduler)
    low, high = (
        scheduler.acquire("anim", ttl_seconds=600, owner_id=owner, queue_seconds=600, priority=priority)
        for owner, priority in (("batch", 20), ("live", 70))
    )

    table = leasectl(queue_stack, "queue")
    as_json = leasectl(queue_stack, "--json", "queue", "--owner", "batch")
    out, _ = table.communicate(timeout=60)
    body, _ = as_json.communicate(timeout=60)

    print(out)
    header, first, second = out.splitlines()
    assert table.returncode == 0 and header.split()[:4] == ["POS", "ID", "PRI", "OWNER"]
    assert first.split()[:4] == ["1", high.lease_id, "70", "live"]
    assert second.split()[:4] == ["2", low.lease_id, "20", "batch"]
    assert [(lease["lease_id"], lease["queue_position"]) for lease in json.loads(body)["queue"]] == [(low.lease_id, 2)]


def test_a_preemption_notice_in_get_and_the_lease_callback(
    queue_stack: RunningStack, scheduler: SchedulerClient
) -> None:
    kept = scheduler.acquire("renderer", ttl_seconds=600, owner_id="steady")
    noticed: list[Lease] = []
    with scheduler.lease(
        kind="renderer",
        ttl_seconds=600,
        owner_id="batch",
        priority=10,
        preemptible=True,
        check_every=0.5,
        on_preemption=noticed.append,
    ) as held:
        time.sleep(MIN_RUNTIME_SECONDS + 1)
        urgent = scheduler.acquire("renderer", ttl_seconds=600, owner_id="live", priority=80, queue_seconds=600)
        wait_for(lambda: noticed, 10, 0.1, "the notice")
        got = leasectl(queue_stack, "get", held.lease_id)
        out, _ = got.communicate(timeout=60)
        print(out)
        assert held.lease_lost.wait(NOTICE_SECONDS + 5)
        wait_for(lambda: scheduler.get(held.lease_id).status == "preempted", 10, 0.1, "the preemption")

    (lease,) = noticed
    assert (lease.lease_id, lease.preempt_priority, held.preempt_at) == (held.lease_id, 80, lease.preempt_at)
    (line,) = [line for line in out.splitlines() if line.startswith("preempt_at")]
    assert line.endswith("for a lease of priority 80: the lease ends preempted then")
    assert wait_for(lambda: scheduler.get(urgent.lease_id).status == "active", 10, 0.1, "the preemptor's admission")
    assert scheduler.get(kept.lease_id).preempt_at is None
