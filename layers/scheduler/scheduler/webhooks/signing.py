"""Signing a delivery as the Standard Webhooks specification does, so that any of its libraries verifies it:
`webhook-id` (the event's id: the same on every retry, receivers dedupe by it), `webhook-timestamp` (the attempt's
epoch seconds: receivers refuse old ones) and `webhook-signature`, `v1,` + base64 of HMAC-SHA256 over
`<id>.<timestamp>.<body>` with the secret's bytes; a secret is `whsec_` + base64 of 32 random bytes.
tests/unit/webhooks verify these signatures with the specification's own `standardwebhooks` package.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105 - the specification's prefix, no secret  # nosec B105
SECRET_BYTES = 32
USER_AGENT = "openalice-scheduler-webhooks/1"


def new_secret() -> str:
    """A fresh signing secret (shown to its owner once, kept in the webhooks table)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(secret: str, message_id: str, timestamp: int, body: str) -> str:
    """The `webhook-signature` value of one attempt."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    mac = hmac.new(key, f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def headers(secret: str, message_id: str, timestamp: int, body: str) -> dict[str, str]:
    """Every header of one attempt."""
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }
