"""docs/events/<type>.schema.json: one per event type, as scripts/event_schemas.py writes them, and every event the
producer emits (for every transition of tests/unit/events/test_producer.py) valid against its type's schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.events.model import EventType, webhook_body
from scheduler.events.producer import events_of

from .images import CREATED, active, image, modify, record

# jsonschema is the dev venv's (requirements-dev.txt); the SDK floor's venv has none: skipped there, named.
jsonschema = pytest.importorskip("jsonschema", reason="the SDK floor venv has no jsonschema")
Draft202012Validator, FormatChecker = jsonschema.Draft202012Validator, jsonschema.FormatChecker

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO / "docs" / "events"
READY = {"worker_state": "ready", "ready_epoch": CREATED + 3}
RELEASING = {"status": "releasing", "claim_id": "c1", "release_outcome": "released", "claimed_by": "anim"}
ENDED_AT = {"released_epoch": CREATED + 30, "ended_by": "sweep", "failure_reason": "worker exited"}
TRANSITIONS = [
    record("INSERT", None, image(status="queued", correlation_id="job-7")),
    modify(image(), active(**READY, region="eu")),
    modify(active(), active(**READY)),
    modify(active(**READY), active(**READY, expires_epoch=CREATED + 900, warned_expiry=CREATED + 900)),
    modify(active(), active(preempt_at=CREATED + 120)),
    *(modify(active(**RELEASING), active(status=status, **ENDED_AT)) for status in ("released", "expired", "failed")),
    modify(active(**RELEASING), active(status="preempted", **ENDED_AT)),
    modify(image(), image(status="failed", owner_id=None, released_epoch=CREATED + 2)),
]


def validator(kind: EventType) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{kind.value}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def emitted() -> list[tuple[EventType, dict[str, Any]]]:
    return [
        (event.type, event.document(number))
        for number, found in enumerate(TRANSITIONS, 1)
        for event in events_of(found)
    ]


def test_the_schemas_are_what_the_script_writes() -> None:
    checked = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "event_schemas.py"), "--check"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr


def test_every_type_has_its_schema_and_no_other_is_there() -> None:
    assert {path.name for path in SCHEMAS.glob("*.schema.json")} == {f"{kind.value}.schema.json" for kind in EventType}


def test_the_transitions_give_every_type() -> None:
    assert {kind for kind, _ in emitted()} == set(EventType)


@pytest.mark.parametrize(("kind", "document"), emitted(), ids=lambda value: getattr(value, "value", ""))
def test_every_event_the_producer_emits_is_valid_against_its_schema(kind: EventType, document: dict[str, Any]) -> None:
    errors = [error.message for error in validator(kind).iter_errors(document)]
    assert not errors


@pytest.mark.parametrize(("kind", "document"), emitted(), ids=lambda value: getattr(value, "value", ""))
def test_a_webhook_body_is_valid_against_its_schema_too(kind: EventType, document: dict[str, Any]) -> None:
    body = json.loads(webhook_body(document))

    assert set(body) == {"type", "timestamp", "data"}
    assert not list(validator(kind).iter_errors(body))


def test_an_event_of_another_type_is_refused_by_a_schema() -> None:
    (_, document), *_ = emitted()

    assert list(validator(EventType.RELEASED).iter_errors(document))
