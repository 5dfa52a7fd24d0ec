"""One delivery (`deliver.Courier`): signed for its webhook, sent to the address checked now, dropped once the
webhook is gone, refused (and retried) when the name now resolves to a non-public address."""

from __future__ import annotations

import json
import time

import pytest

from .fakes import DOCUMENT, PUBLIC, START, Arranged, Receiver

# The specification's own library verifies: in the dev venv (requirements-dev.txt); the SDK floor's venv holds the
# layer's packages and the unit suite's tools only, so there these tests are skipped, named.
standardwebhooks = pytest.importorskip("standardwebhooks", reason="the SDK floor venv has no standardwebhooks")
Webhook = standardwebhooks.Webhook


def test_a_delivery_is_signed_with_its_webhooks_secret_and_carries_the_event() -> None:
    receiver = Receiver(204)
    arranged = Arranged(receiver)
    arranged.clock.now = time.time()  # the library refuses a signature older than 5 minutes

    outcome = arranged.courier.deliver(arranged.message())

    ((target, headers, body),) = receiver.got
    assert outcome.state == "delivered" and outcome.status == 204
    assert Webhook(arranged.secret).verify(body.decode(), headers) == {
        "type": DOCUMENT["type"],
        "timestamp": DOCUMENT["timestamp"],
        "data": DOCUMENT["data"],
    }
    assert headers["webhook-id"] == DOCUMENT["id"] and target.address == PUBLIC


def test_a_removed_webhook_gets_nothing_more() -> None:
    receiver = Receiver(200)
    arranged = Arranged(receiver)
    arranged.webhooks.delete(arranged.record.webhook_id)

    assert arranged.courier.deliver(arranged.message()).state == "dropped" and receiver.got == []


def test_a_type_the_webhook_no_longer_takes_is_dropped() -> None:
    receiver = Receiver(200)
    arranged = Arranged(receiver)
    message = {**arranged.message(), "event": {**DOCUMENT, "type": "lease.renewed"}}

    assert arranged.courier.deliver(message).state == "dropped" and receiver.got == []


def test_a_name_that_now_resolves_to_a_private_address_is_not_sent_to_and_is_retried() -> None:
    receiver = Receiver(200)
    arranged = Arranged(receiver, addresses=("10.0.0.7",))

    outcome = arranged.courier.deliver(arranged.message())

    assert outcome.state == "retrying" and "private" in str(outcome.error) and receiver.got == []
    ((queued, _),) = arranged.queue.sent
    assert queued["attempt"] == 1 and "10.0.0.7" in queued["last_error"]


def test_a_retry_is_queued_with_its_backoff_and_counts_its_attempts() -> None:
    arranged = Arranged(Receiver(503))

    outcome = arranged.courier.deliver(arranged.message())

    ((queued, delay),) = arranged.queue.sent
    assert outcome.state == "retrying" and 1 <= delay <= 2
    assert queued["attempt"] == 1 and queued["first"] == START and queued["last_status"] == 503
    assert json.dumps(queued).count(arranged.secret) == 0
