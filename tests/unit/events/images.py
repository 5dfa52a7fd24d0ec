"""Stream records of the leases table as Lambda hands them over: images in DynamoDB's JSON, built from a few
fields (a lease as the store writes it), changed the way each transition changes it."""

from __future__ import annotations

from typing import Any

LEASE_ID = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
CREATED = 1_796_000_000
Image = dict[str, dict[str, Any]]

_sequence = [1_100_000_000_000_000_000]


def image(**fields: Any) -> Image:
    """A lease item: `pending`, starting, its worker unknown; `fields` set (None removes one). Numbers are epochs."""
    values: dict[str, Any] = {
        "lease_id": LEASE_ID,
        "provider": "local-docker",
        "kind": "renderer",
        "gpu": "none",
        "status": "pending",
        "owner_id": "alice",
        "created_by": "anim",
        "created_epoch": CREATED,
        "expires_epoch": CREATED + 600,
        "ttl_seconds": 600,
        "worker_state": "starting",
        "live_shard": "0",
        "due_at": CREATED + 600,
    }
    values.update(fields)
    item: Image = {}
    for name, value in values.items():
        if value is None:
            continue
        item[name] = {"N": str(value)} if isinstance(value, int) else {"S": str(value)}
    return item


def active(**fields: Any) -> Image:
    """An active lease on its worker (token, endpoint), still starting."""
    return image(
        **{
            "status": "active",
            "provider_token": "ctr-secret-token",
            "endpoint": "http://10.0.0.5:8080",
            "cost_per_hour": 1,
            **fields,
        }
    )


def record(event_name: str, old: Image | None, new: Image | None, sequence: str | None = None) -> dict[str, Any]:
    """A stream record (`sequence`: its SequenceNumber, else the next one)."""
    if sequence is None:
        _sequence[0] += 1
        sequence = str(_sequence[0])
    dynamodb: dict[str, Any] = {
        "ApproximateCreationDateTime": CREATED + 5,
        "Keys": {"lease_id": {"S": LEASE_ID}},
        "SequenceNumber": sequence,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if old is not None:
        dynamodb["OldImage"] = old
    if new is not None:
        dynamodb["NewImage"] = new
    return {"eventID": f"ev-{sequence}", "eventName": event_name, "eventSource": "aws:dynamodb", "dynamodb": dynamodb}


def modify(old: Image, new: Image, sequence: str | None = None) -> dict[str, Any]:
    return record("MODIFY", old, new, sequence)
