"""`make run`'s EventBridge and SQS (devstack/messaging.py) on the embedded moto: the template's queues and bus made,
the SQS event source mapping emulated as Lambda runs it, and the tap recording what the bus received."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.dynamodb import EmbeddedDynamoDB
from devstack.lambdas import FunctionError
from devstack.messaging import BusTap, LocalMessaging, QueueMapping, client
from devstack.template import QueueMappingSpec, SamTemplate


class _Lambda:
    """A delivery function that fails the messages whose bodies say so (or the whole batch)."""

    def __init__(self, crash: bool = False) -> None:
        self.crash = crash
        self.batches: list[list[str]] = []

    def invoke(self, function: str, event: dict[str, Any], request_id: str | None = None) -> Any:
        records = event["Records"]
        self.batches.append([record["body"] for record in records])
        assert all(record["eventSource"] == "aws:sqs" and record["eventSourceARN"] for record in records)
        if self.crash:
            raise FunctionError("error", {"errorType": "RuntimeError", "errorMessage": "boom"})
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records if r["body"] == "fail"]}


@pytest.fixture(scope="module")
def moto() -> Iterator[EmbeddedDynamoDB]:
    server = EmbeddedDynamoDB.start()
    yield server
    server.stop()


def quick(template: SamTemplate) -> SamTemplate:
    """The template's queues with a one-second visibility timeout and a redrive after one receive."""
    queues = {name: dict(props) for name, props in template.queues.items()}
    queues["WebhookDeliveryQueue"]["VisibilityTimeout"] = 1
    queues["WebhookDeliveryQueue"]["RedrivePolicy"] = {
        **queues["WebhookDeliveryQueue"]["RedrivePolicy"],
        "maxReceiveCount": 2,
    }
    return SamTemplate(raw={}, queues=queues, buses=dict(template.buses), queue_mappings=list(template.queue_mappings))


@pytest.fixture
def messaging(moto: EmbeddedDynamoDB, tmp_path: Path) -> LocalMessaging:
    made = LocalMessaging(moto.endpoint_url, quick(SamTemplate.load()), tmp_path)
    for url in client(moto.endpoint_url, "sqs").list_queues().get("QueueUrls", []):
        client(moto.endpoint_url, "sqs").delete_queue(QueueUrl=url)
    for bus in client(moto.endpoint_url, "events").list_event_buses()["EventBuses"]:
        if bus["Name"] != "default":
            for rule in client(moto.endpoint_url, "events").list_rules(EventBusName=bus["Name"])["Rules"]:
                events = client(moto.endpoint_url, "events")
                events.remove_targets(Rule=rule["Name"], EventBusName=bus["Name"], Ids=["tap"])
                events.delete_rule(Name=rule["Name"], EventBusName=bus["Name"])
            client(moto.endpoint_url, "events").delete_event_bus(Name=bus["Name"])
    made.create()
    return made


def mapping(messaging: LocalMessaging, moto: EmbeddedDynamoDB, function: _Lambda) -> QueueMapping:
    (spec,) = [spec for spec in SamTemplate.load().queue_mappings if spec.queue == "WebhookDeliveryQueue"]
    sqs = client(moto.endpoint_url, "sqs")
    url = messaging.queue_urls["WebhookDeliveryQueue"]
    return QueueMapping(sqs, url, messaging.queue_arns["WebhookDeliveryQueue"], spec, function, wait_seconds=0)  # type: ignore[arg-type]


def send(moto: EmbeddedDynamoDB, url: str, *bodies: str) -> None:
    for body in bodies:
        client(moto.endpoint_url, "sqs").send_message(QueueUrl=url, MessageBody=body)


def test_the_template_s_queues_and_bus_are_made_and_named_as_ref_gives_them(messaging: LocalMessaging) -> None:
    assert set(messaging.queue_urls) == {"StreamFailureQueue", "WebhookDeliveryQueue", "WebhookDeadLetterQueue"}
    assert messaging.bus_names == {"LifecycleEventBus": "openalice-scheduler-lifecycle"}
    assert messaging.queue_urls["WebhookDeliveryQueue"].endswith("openalice-scheduler-webhook-delivery-queue")


def test_the_sqs_mapping_takes_the_template_s_batch_size_and_concurrency() -> None:
    (spec,) = SamTemplate.load().queue_mappings
    assert spec == QueueMappingSpec("WebhookDeliveryFunction", "WebhookDeliveryQueue", 10, True, 20)


def test_a_handled_batch_is_deleted(messaging: LocalMessaging, moto: EmbeddedDynamoDB) -> None:
    function = _Lambda()
    poller = mapping(messaging, moto, function)
    send(moto, messaging.queue_urls["WebhookDeliveryQueue"], "a", "b")

    while poller.poll_once():
        pass

    assert sorted(body for batch in function.batches for body in batch) == ["a", "b"] and poller.delivered == 2


def test_a_reported_failure_reappears_after_the_visibility_timeout(
    messaging: LocalMessaging, moto: EmbeddedDynamoDB
) -> None:
    function = _Lambda()
    poller = mapping(messaging, moto, function)
    send(moto, messaging.queue_urls["WebhookDeliveryQueue"], "ok", "fail")
    poller.poll_once()

    time.sleep(1.2)
    poller.poll_once()

    assert function.batches[-1] == ["fail"]


def test_a_failed_batch_is_moved_to_the_dead_letter_queue_after_its_receives(
    messaging: LocalMessaging, moto: EmbeddedDynamoDB
) -> None:
    poller = mapping(messaging, moto, _Lambda(crash=True))
    send(moto, messaging.queue_urls["WebhookDeliveryQueue"], "poison")
    for _ in range(3):
        poller.poll_once()
        time.sleep(1.1)

    dead = client(moto.endpoint_url, "sqs").receive_message(QueueUrl=messaging.queue_urls["WebhookDeadLetterQueue"])
    assert [message["Body"] for message in dead.get("Messages", [])] == ["poison"]


def test_the_tap_records_every_event_the_bus_received(
    messaging: LocalMessaging, moto: EmbeddedDynamoDB, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    detail = {
        "id": "evt_1",
        "type": "lease.ready",
        "data": {"lease_id": "L1", "sequence": 2, "actor": "anim", "reason": None},
    }
    client(moto.endpoint_url, "events").put_events(
        Entries=[
            {
                "Source": "openalice.scheduler",
                "DetailType": "lease.ready",
                "Detail": json.dumps(detail),
                "EventBusName": "openalice-scheduler-lifecycle",
            }
        ]
    )
    tap = BusTap(
        client(moto.endpoint_url, "sqs"), messaging.taps["openalice-scheduler-lifecycle"], tmp_path / "events.jsonl"
    )

    assert tap.drain_once() == 1
    (recorded,) = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert recorded["detail"] == detail and recorded["source"] == "openalice.scheduler"
    assert "event lease.ready lease L1 #2 by anim" in capsys.readouterr().err
