#!/usr/bin/env python3
"""`make contract` (with wire.py): docs/events/<type>.schema.json, the JSON Schema of each lifecycle event type.

One document per event — `{"id", "type", "timestamp", "data"}` — is the EventBridge event's `detail`, an entry of
`GET /v1/lease/{id}/events` and, without `id` (the `webhook-id` header), a webhook delivery's body. The schemas
are written from `scheduler.events.model` (the types and the fields of `data`) and what each type says of the
lease here; tests/unit/events/test_schemas.py holds every event the producer emits to its schema, and the files
to this script's output.

    .venv/bin/python scripts/event_schemas.py           # (re)writes docs/events/
    .venv/bin/python scripts/event_schemas.py --check   # exit 1, naming each file, when one is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "layers" / "scheduler")]

from scheduler.events.model import DATA_FIELDS, EventType  # noqa: E402

TARGET = REPO / "docs" / "events"
LEASE_ID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
TIME = {"type": "string", "format": "date-time"}
MAYBE_TIME = {"type": ["string", "null"], "format": "date-time"}
MAYBE_TEXT = {"type": ["string", "null"]}
ENDED = {EventType.RELEASED, EventType.EXPIRED, EventType.FAILED, EventType.PREEMPTED}

# When each comes, and the lease's status it comes with.
TYPES: dict[EventType, tuple[str, str]] = {
    EventType.QUEUED: ("queued", "The acquire could not be served now and waits in the queue (issue 26)."),
    EventType.ACTIVE: ("active", "The lease has its worker; lease.ready follows when (or as soon as) it is usable."),
    EventType.READY: ("active", "The lease's worker is usable (ready_at is when the service saw it)."),
    EventType.RENEWED: ("active", "The lease was renewed: expires_at is its new expiry."),
    EventType.PREEMPTION_NOTICE: ("active", "The lease will be preempted at preempt_at (issue 26)."),
    EventType.EXPIRING: (
        "active",
        "The lease expires at expires_at, EXPIRY_WARNING_SECONDS (up to a sweep period more) from now; renew it"
        " to keep it. Once per expiry.",
    ),
    EventType.RELEASED: ("released", "The lease was released by its caller and its worker removed."),
    EventType.EXPIRED: ("expired", "The lease ran past its expiry and its worker was removed."),
    EventType.FAILED: ("failed", "The lease failed (its worker died, never booted, or was never made): see reason."),
    EventType.PREEMPTED: ("preempted", "The lease was preempted for a higher-priority one (issue 26): see reason."),
}


def _data(kind: EventType, status: str) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "lease_id": {"type": "string", "pattern": LEASE_ID},
        "owner_id": MAYBE_TEXT,
        "status": {"const": status},
        "worker_state": {"const": "ready"} if kind is EventType.READY else {"enum": ["starting", "ready"]},
        "provider": MAYBE_TEXT,
        "kind": MAYBE_TEXT,
        "gpu": MAYBE_TEXT,
        "region": MAYBE_TEXT,
        "correlation_id": MAYBE_TEXT,
        "created_at": TIME,
        "expires_at": TIME,
        "ready_at": TIME if kind is EventType.READY else MAYBE_TIME,
        "released_at": TIME if kind in ENDED else MAYBE_TIME,
        "preempt_at": TIME if kind is EventType.PREEMPTION_NOTICE else MAYBE_TIME,
        "actor": {
            "type": "string",
            "description": "Who made the transition: a caller's name, sweep, ttl-stream, reconciler, or unknown.",
        },
        "reason": {**MAYBE_TEXT, "description": "Why, where the lease says (an end's failure_reason)."},
        "sequence": {"type": "integer", "minimum": 1, "description": "1, 2, 3… in the lease's transition order."},
    }
    if list(properties) != [*DATA_FIELDS, "sequence"]:
        raise SystemExit("scheduler.events.model.DATA_FIELDS changed: write the schemas of the fields here")
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def schema(kind: EventType) -> dict[str, Any]:
    """The JSON Schema of one event type."""
    status, when = TYPES[kind]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:openalice-scheduler:event:{kind.value}",
        "title": kind.value,
        "description": when,
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "timestamp", "data"],
        "properties": {
            "id": {
                "type": "string",
                "pattern": "^evt_[0-9a-f]{32}$",
                "description": "The event's id, the same however often it is handed over (a webhook's webhook-id).",
            },
            "type": {"const": kind.value},
            "timestamp": {**TIME, "description": "When the transition was written."},
            "data": _data(kind, status),
        },
    }


def files() -> dict[Path, str]:
    return {TARGET / f"{kind.value}.schema.json": json.dumps(schema(kind), indent=2) + "\n" for kind in EventType}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail, naming each stale file, instead of writing")
    args = parser.parse_args(argv)
    wanted = files()
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    extra = [path for path in TARGET.glob("*.schema.json") if path not in wanted]
    if args.check:
        for path in [*stale, *extra]:
            print(f"{path.relative_to(REPO)} is stale: run `make contract`", file=sys.stderr)
        return 1 if stale or extra else 0
    TARGET.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.write_text(wanted[path])
    for path in extra:
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
