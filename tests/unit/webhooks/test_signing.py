"""Signing (`scheduler/webhooks/signing.py`), verified with the Standard Webhooks specification's own library."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from scheduler.webhooks.signing import headers, new_secret

# The specification's own library verifies: in the dev venv (requirements-dev.txt); the SDK floor's venv holds the
# layer's packages and the unit suite's tools only, so there these tests are skipped, named.
standardwebhooks = pytest.importorskip("standardwebhooks", reason="the SDK floor venv has no standardwebhooks")
Webhook = standardwebhooks.Webhook
WebhookVerificationError = standardwebhooks.webhooks.WebhookVerificationError

BODY = '{"type":"lease.ready","timestamp":"2026-11-30T04:00:03Z","data":{"sequence":2}}'


def test_a_signed_delivery_verifies_with_the_standard_webhooks_library() -> None:
    secret = new_secret()
    sent = headers(secret, "evt_" + "a" * 32, int(time.time()), BODY)

    verified = Webhook(secret).verify(BODY, sent)

    assert verified == {"type": "lease.ready", "timestamp": "2026-11-30T04:00:03Z", "data": {"sequence": 2}}


def test_a_signature_matches_the_librarys_own() -> None:
    secret = new_secret()
    stamp = 1_796_011_203

    ours = headers(secret, "evt_1", stamp, BODY)["webhook-signature"]

    assert ours == Webhook(secret).sign("evt_1", datetime.fromtimestamp(stamp, UTC), BODY)


def test_a_changed_body_does_not_verify() -> None:
    secret = new_secret()
    sent = headers(secret, "evt_1", int(time.time()), BODY)

    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace("ready", "failed"), sent)


def test_another_webhooks_secret_does_not_verify() -> None:
    sent = headers(new_secret(), "evt_1", int(time.time()), BODY)

    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, sent)


def test_a_stale_attempt_is_refused_by_the_receiver() -> None:
    secret = new_secret()
    sent = headers(secret, "evt_1", int(time.time()) - 600, BODY)

    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, sent)


def test_secrets_are_whsec_and_32_random_bytes_each_time() -> None:
    first, second = new_secret(), new_secret()

    assert first.startswith("whsec_") and len(first) == len("whsec_") + 44 and first != second


def test_the_headers_name_the_event_and_the_attempt() -> None:
    sent = headers(new_secret(), "evt_1", 1_796_011_203, BODY)

    assert (sent["webhook-id"], sent["webhook-timestamp"], sent["content-type"]) == (
        "evt_1",
        "1796011203",
        "application/json",
    )
