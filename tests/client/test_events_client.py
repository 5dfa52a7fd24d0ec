"""The client's lifecycle events and webhooks methods, and `leasectl events`, `webhooks` and `watch --events`,
against the real local stack; the follower of `watch --events` against a scripted client; the client's event
types held to openapi.yaml's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from openalice_scheduler_client import EVENT_TYPES, InvalidRequest, LeaseEvent, SchedulerClient
from openalice_scheduler_client.cli_events import EventFollower
from openalice_scheduler_client.errors import NotFound
from standardwebhooks import Webhook

from tests.client.test_cli import cli_env
from tests.support.receiver import receiving
from tests.support.stack import RunningStack
from tests.support.waiting import wait_for

SPEC = Path(__file__).resolve().parents[2] / "openapi.yaml"


def test_the_client_s_event_types_are_openapi_yaml_s() -> None:
    spec = yaml.safe_load(SPEC.read_text())
    assert tuple(spec["components"]["schemas"]["EventType"]["enum"]) == EVENT_TYPES


@pytest.fixture
def scheduler(stack: RunningStack) -> Iterator[SchedulerClient]:
    with SchedulerClient(stack.url, stack.secret, timeout=60.0) as client:
        yield client


def leasectl(stack: RunningStack, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openalice_scheduler_client.cli", *argv],
        env=cli_env(SCHEDULER_URL=stack.url, INTERNAL_SECRET=stack.secret),
        capture_output=True,
        text=True,
        timeout=120,
    )


def ended_history(scheduler: SchedulerClient, lease_id: str, last: str) -> list[LeaseEvent]:
    return wait_for(
        lambda: (found := scheduler.events(lease_id)) and found[-1].type == last and found,
        timeout=20,
        what=f"{last} in the history",
    )


def test_a_lease_s_history_through_the_client(scheduler: SchedulerClient) -> None:
    lease = scheduler.acquire("renderer", ttl_seconds=600, owner_id="history")
    scheduler.release(lease.lease_id, owner_id="history")

    events = ended_history(scheduler, lease.lease_id, "lease.released")

    assert [(event.type, event.sequence) for event in events] == [
        ("lease.active", 1),
        ("lease.ready", 2),
        ("lease.released", 3),
    ]
    assert scheduler.events(lease.lease_id, after=2) == events[2:]
    with pytest.raises(NotFound):
        scheduler.events("00000000-0000-4000-8000-000000000000")


def test_a_webhook_added_delivers_what_the_standard_webhooks_library_verifies(scheduler: SchedulerClient) -> None:
    with receiving() as receiver:
        created = scheduler.add_webhook(receiver.url, events=["lease.ready"], owner_id="hooked")
        receiver.secret = created.secret
        assert created.secret not in repr(created)
        lease = scheduler.acquire("renderer", ttl_seconds=600, owner_id="hooked")

        (event,) = receiver.wait_for(lease.lease_id, ["lease.ready"])
        (delivery,) = receiver.accepted()
        verified = Webhook(created.secret).verify(delivery.body.decode(), delivery.headers)
        assert LeaseEvent.from_delivery(delivery.event_id, verified).sequence == 2 == event["data"]["sequence"]

    assert [hook.id for hook in scheduler.webhooks(owner_id="hooked")] == [created.webhook.id]
    scheduler.remove_webhook(created.webhook.id, owner_id="hooked")
    assert scheduler.webhooks(owner_id="hooked") == []


def test_a_webhook_to_a_private_address_is_refused_naming_why(scheduler: SchedulerClient) -> None:
    with pytest.raises(InvalidRequest) as refused:
        scheduler.add_webhook("https://192.168.1.10/hook", owner_id="hooked")

    assert refused.value.details["problems"] == [{"field": "url", "problem": "192.168.1.10 is a private address"}]


def test_leasectl_events_shows_the_history_with_actors(stack: RunningStack, scheduler: SchedulerClient) -> None:
    lease = scheduler.acquire("renderer", ttl_seconds=600, owner_id="cli-events")
    scheduler.release(lease.lease_id, owner_id="cli-events")
    ended_history(scheduler, lease.lease_id, "lease.released")

    shown = leasectl(stack, "events", lease.lease_id)
    as_json = json.loads(leasectl(stack, "--json", "events", lease.lease_id).stdout)

    assert shown.returncode == 0, shown.stderr
    assert [line.split()[1] for line in shown.stdout.splitlines()] == ["lease.active", "lease.ready", "lease.released"]
    assert [event["data"]["sequence"] for event in as_json["events"]] == [1, 2, 3]


def test_leasectl_webhooks_add_list_remove(stack: RunningStack) -> None:
    added = leasectl(
        stack, "--json", "webhooks", "add", "http://127.0.0.1:9/in", "--owner", "cli-hooks", "--event", "lease.failed"
    )
    assert added.returncode == 0, added.stderr
    webhook = json.loads(added.stdout)
    assert webhook["secret"].startswith("whsec_") and webhook["webhook"]["events"] == ["lease.failed"]

    listed = leasectl(stack, "webhooks", "list", "--owner", "cli-hooks")
    assert webhook["webhook"]["id"] in listed.stdout and "failed" in listed.stdout

    assert leasectl(stack, "webhooks", "remove", webhook["webhook"]["id"], "--owner", "cli-hooks").returncode == 0
    assert leasectl(stack, "webhooks", "list", "--owner", "cli-hooks").stdout == "No webhooks.\n"


def test_leasectl_watch_events_prints_each_event_as_it_happens(stack: RunningStack, scheduler: SchedulerClient) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "openalice_scheduler_client.cli", "--json", "watch", "--events", "--interval", "0.5"],
        env=cli_env(SCHEDULER_URL=stack.url, INTERNAL_SECRET=stack.secret),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stderr is not None
        assert "watching the live leases' events" in watcher.stderr.readline()  # its first poll is done
        lease = scheduler.acquire("renderer", ttl_seconds=600, owner_id="watched")
        seen: list[str] = []
        deadline = time.monotonic() + 60
        assert watcher.stdout is not None
        while "lease.released" not in seen and time.monotonic() < deadline:
            event = json.loads(watcher.stdout.readline())
            if event["data"]["lease_id"] == lease.lease_id:
                seen.append(event["type"])
                if event["type"] == "lease.ready":
                    # Released once the watch has found it live: it follows the live leases, polling.
                    scheduler.release(lease.lease_id, owner_id="watched")
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    assert seen == ["lease.active", "lease.ready", "lease.released"]


class _Scripted:
    """A client whose live leases and histories a test sets."""

    def __init__(self) -> None:
        self.live: list[str] = []
        self.history: dict[str, list[LeaseEvent]] = {}

    def list(self) -> list[Any]:
        return [type("L", (), {"lease_id": lease_id})() for lease_id in self.live]

    def events(self, lease_id: str, *, after: int = 0) -> list[LeaseEvent]:
        if lease_id not in self.history:
            raise NotFound("gone")
        return [event for event in self.history[lease_id] if event.sequence > after]

    def happen(self, lease_id: str, kind: str) -> None:
        events = self.history.setdefault(lease_id, [])
        events.append(
            LeaseEvent("e", kind, f"2026-11-30T04:00:{len(events):02d}Z", lease_id, len(events) + 1, "x", "a")
        )


def test_the_follower_shows_only_what_happens_after_it_starts_and_each_end_once() -> None:
    client = _Scripted()
    client.live = ["old"]
    client.happen("old", "lease.active")
    follower = EventFollower(client)  # type: ignore[arg-type]
    assert follower.poll() == []

    client.live = ["old", "new"]
    client.happen("new", "lease.active")
    client.happen("old", "lease.renewed")
    assert sorted(event.type for event in follower.poll()) == ["lease.active", "lease.renewed"]

    client.live = []  # both left the listing between two polls: their ends are still shown, once
    client.happen("old", "lease.expired")
    client.happen("new", "lease.released")
    assert sorted(event.type for event in follower.poll()) == ["lease.expired", "lease.released"]
    assert follower.poll() == []
