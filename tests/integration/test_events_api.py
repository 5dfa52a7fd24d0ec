"""Lifecycle events through the local stack (`make run`): the leases table's stream → the events function → the
history, the EventBridge bus (moto) and the owners' webhooks, delivered by the delivery function (SQS, moto) to
a receiver on loopback that verifies every delivery with the `standardwebhooks` package."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.support.booting_image import import_booting_image
from tests.support.receiver import Receiver, receiving
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

LEASE_LABEL = "openalice.scheduler/lease-id"
WARNING_SECONDS = 5
RETRY_SECONDS = 30
LIFE = ["lease.active", "lease.ready", "lease.renewed", "lease.expiring", "lease.expired"]
# In secret mode (make run's) every request's caller is the shared secret's holder.
CALLER = "shared-secret"
BOOTING_IMAGE = "openalice-test/anim-booting:v1"


@pytest.fixture(scope="module")
def events_stack(
    docker_host: Any, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    """The local stack sweeping every second, warning 5 s ahead, retrying deliveries 30 s; anim workers boot
    in about 2 s (their image's HEALTHCHECK), renderer workers are ready at once."""
    import_booting_image(docker_client, BOOTING_IMAGE)
    running = start_stack(
        tmp_path_factory.mktemp("events"),
        docker_env=docker_host.env(),
        extra_env={
            "SWEEP_INTERVAL_SECONDS": "1",
            "RECONCILE_INTERVAL_SECONDS": "3600",
            "EXPIRY_WARNING_SECONDS": str(WARNING_SECONDS),
            "WEBHOOK_RETRY_SECONDS": str(RETRY_SECONDS),
            "ANIM_IMAGE": BOOTING_IMAGE,
        },
    )
    yield running
    running.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def subscribe(stack: RunningStack, receiver: Receiver, owner: str, url: str | None = None) -> str:
    """A webhook of `owner` to the receiver; the receiver verifies with its secret."""
    answer = stack.request("POST", "/v1/webhooks", owner=owner, json={"url": url or receiver.url, "owner_id": owner})
    assert answer.status_code == 201, answer.text
    if url is None:
        receiver.secret = answer.json()["secret"]
    return str(answer.json()["webhook"]["id"])


def history(stack: RunningStack, lease_id: str) -> list[dict[str, Any]]:
    answer = stack.request("GET", f"/v1/lease/{lease_id}/events")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["events"])


def sqs(stack: RunningStack) -> Any:
    endpoint = stack.functions_env()["AWS_ENDPOINT_URL_DYNAMODB"]
    return boto3.client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
    )


def test_one_lease_s_whole_life_reaches_the_receiver_signed_and_in_its_history(
    events_stack: RunningStack, receiver: Receiver
) -> None:
    subscribe(events_stack, receiver, "life")
    lease = events_stack.acquire(owner_id="life", ttl_seconds=30).json()["lease"]
    receiver.wait_for(lease["lease_id"], LIFE[:2])
    renewed = events_stack.request(
        "POST", f"/v1/lease/{lease['lease_id']}/renew", owner="life", json={"ttl_seconds": 8}
    )
    assert renewed.status_code == 200

    delivered = receiver.wait_for(lease["lease_id"], LIFE, timeout=40)

    assert all(delivery.verified for delivery in receiver.accepted())
    assert [event["data"]["sequence"] for event in delivered] == [1, 2, 3, 4, 5]
    recorded = history(events_stack, lease["lease_id"])
    assert [(event["type"], event["data"]["sequence"]) for event in recorded] == [
        (kind, number) for number, kind in enumerate(LIFE, 1)
    ]
    assert [event["data"]["actor"] for event in recorded] == [CALLER, CALLER, CALLER, "sweep", "sweep"]
    assert [event["data"] for event in recorded] == [event["data"] for event in delivered]


def test_a_worker_found_ready_after_its_activation_is_the_sweeps_in_the_history(events_stack: RunningStack) -> None:
    lease = events_stack.acquire(kind="anim", owner_id="booting", ttl_seconds=600).json()["lease"]
    assert lease["worker_state"] == "starting"

    events = wait_for(
        lambda: len(found := history(events_stack, lease["lease_id"])) >= 2 and found, timeout=30, what="lease.ready"
    )

    assert [(event["type"], event["data"]["actor"]) for event in events] == [
        ("lease.active", CALLER),
        ("lease.ready", "sweep"),  # nobody read the lease: the sweep's readiness pass found its worker ready
    ]


def test_a_killed_worker_s_lease_failed_reaches_the_receiver_with_why(
    events_stack: RunningStack, receiver: Receiver, docker_client: Any
) -> None:
    subscribe(events_stack, receiver, "killed")
    lease = events_stack.acquire(owner_id="killed", ttl_seconds=600).json()["lease"]
    receiver.wait_for(lease["lease_id"], ["lease.active", "lease.ready"])
    (container,) = docker_client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease['lease_id']}"})

    container.kill()

    *_, failed = receiver.wait_for(lease["lease_id"], ["lease.active", "lease.ready", "lease.failed"], timeout=30)
    assert failed["data"]["reason"].startswith("the worker container exited with code 137")
    assert history(events_stack, lease["lease_id"])[-1]["type"] == "lease.failed"


def test_a_receiver_down_for_a_while_gets_every_event_once_it_recovers(
    events_stack: RunningStack, receiver: Receiver
) -> None:
    subscribe(events_stack, receiver, "outage")
    receiver.refuse_until = time.time() + 8
    lease = events_stack.acquire(owner_id="outage", ttl_seconds=600).json()["lease"]
    assert events_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="outage").status_code == 204

    receiver.wait_for(lease["lease_id"], ["lease.active", "lease.ready", "lease.released"], timeout=40)

    refused = [delivery for delivery in receiver.deliveries if delivery.status == 503]
    assert refused and all(delivery.verified for delivery in receiver.deliveries)
    accepted = Counter(delivery.event_id for delivery in receiver.accepted())
    assert set(accepted.values()) == {1}, "each event is accepted once, whatever its retries"


def test_a_dead_endpoint_holds_up_no_other_owner_and_ends_in_the_dead_letter_queue(
    events_stack: RunningStack, receiver: Receiver
) -> None:
    subscribe(events_stack, receiver, "dead-owner", url="http://127.0.0.1:9/nobody-listens")
    subscribe(events_stack, receiver, "live-owner")
    dead = events_stack.acquire(owner_id="dead-owner", ttl_seconds=600).json()["lease"]
    started = time.time()
    live = events_stack.acquire(owner_id="live-owner", ttl_seconds=600).json()["lease"]

    receiver.wait_for(live["lease_id"], ["lease.active", "lease.ready"], timeout=20)
    assert max(delivery.received for delivery in receiver.accepted()) - started < 10

    queues = sqs(events_stack)
    (dead_letters,) = [url for url in queues.list_queues()["QueueUrls"] if url.endswith("webhook-dead-letter-queue")]

    def dead_lettered() -> list[dict[str, Any]]:
        got = queues.receive_message(QueueUrl=dead_letters, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        return [json.loads(message["Body"]) for message in got.get("Messages", [])]

    found = wait_for(dead_lettered, timeout=RETRY_SECONDS + 40, interval=1, what="the dead-letter queue")
    assert {message["event"]["data"]["lease_id"] for message in found} == {dead["lease_id"]}
    assert all("ConnectionRefusedError" in message["last_error"] and message["attempt"] >= 3 for message in found)
    wait_for(lambda: "webhook delivery dead-lettered" in events_stack.logs(), timeout=10, what="its log line")


def test_the_bus_receives_every_event(events_stack: RunningStack, receiver: Receiver) -> None:
    lease = events_stack.acquire(owner_id="bus", ttl_seconds=600).json()["lease"]
    events_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="bus")
    tapped = events_stack.state_dir / "events.jsonl"

    def published() -> list[dict[str, Any]]:
        lines = tapped.read_text().splitlines() if tapped.exists() else []
        found = [json.loads(line) for line in lines]
        return [event for event in found if event["detail"]["data"]["lease_id"] == lease["lease_id"]]

    events = wait_for(lambda: len(published()) >= 3 and published(), timeout=20, what="the bus")
    assert [event["detail-type"] for event in events] == ["lease.active", "lease.ready", "lease.released"]
    assert {event["source"] for event in events} == {"openalice.scheduler"}


def test_a_webhook_to_a_private_address_is_refused_naming_why(events_stack: RunningStack) -> None:
    answer = events_stack.request(
        "POST", "/v1/webhooks", owner="x", json={"url": "https://10.1.2.3/hook", "owner_id": "x"}
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["details"]["problems"] == [
        {"field": "url", "problem": "10.1.2.3 is a private address"}
    ]


def test_the_history_of_another_owners_lease_reads_like_any_lease_in_secret_mode(events_stack: RunningStack) -> None:
    lease = events_stack.acquire(owner_id="reader", ttl_seconds=600).json()["lease"]

    events = wait_for(lambda: history(events_stack, lease["lease_id"]), timeout=10, what="the history")

    assert events[0]["type"] == "lease.active"
    assert events_stack.request("GET", "/v1/lease/00000000-0000-4000-8000-000000000000/events").status_code == 404
