"""DynamoDB's refusals in its own wire shapes, and the faults (`DYNAMODB_FAULTS`) that answer a request
with one before anything is applied: `TransactionConflictException` (single-item writes),
`TransactionCanceledException` with a `TransactionConflict` reason (transactions),
`ProvisionedThroughputExceededException` or `ThrottlingException` (any data-plane request)."""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any

_PREFIX = "com.amazonaws.dynamodb.v20120810#"


@dataclass(frozen=True)
class Faults:
    """Probabilities of the contention answers DynamoDB gives; all zero unless DYNAMODB_FAULTS sets them."""

    conflict: float = 0.0
    throttle: float = 0.0
    seed: int | None = None

    @classmethod
    def parse(cls, text: str) -> Faults:
        """`conflict=0.1,throttle=0.05[,seed=7]`; ValueError naming what is wrong."""
        values: dict[str, Any] = {}
        for part in (piece.strip() for piece in text.split(",")):
            if not part:
                continue
            name, _, raw = part.partition("=")
            name = name.strip()
            if name not in ("conflict", "throttle", "seed"):
                raise ValueError(f"DYNAMODB_FAULTS: unknown fault {name!r} (known: conflict, throttle, seed)")
            try:
                if not raw.isascii() or "_" in raw:  # int() and float() also take `٣` and `1_0`
                    raise ValueError(raw)
                number = int(raw) if name == "seed" else float(raw)
            except ValueError as error:
                raise ValueError(f"DYNAMODB_FAULTS: {name} needs a number, not {raw!r}") from error
            if name != "seed" and not 0.0 <= number <= 1.0:
                raise ValueError(f"DYNAMODB_FAULTS: {name} is a probability from 0 to 1, not {raw}")
            values[name] = number
        return cls(**values)

    @property
    def active(self) -> bool:
        """True when any fault may be injected."""
        return self.conflict > 0 or self.throttle > 0

    def describe(self) -> str:
        """`conflict=0.1,throttle=0.05` (what the stack prints at start)."""
        return f"conflict={self.conflict:g},throttle={self.throttle:g}"


@dataclass
class FaultCounts:
    """How many faults of each kind were injected (for load runs and tests)."""

    by_code: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, code: str) -> None:
        with self.lock:
            self.by_code[code] = self.by_code.get(code, 0) + 1


class Refusal(Exception):
    """An answer DynamoDB gives instead of doing the request."""

    def __init__(self, code: str, message: str, extra: dict[str, Any] | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra or {}
        self.status = status

    def body(self) -> bytes:
        type_name = code_type(self.code)
        key = "Message" if self.code == "TransactionCanceledException" else "message"
        return json.dumps({"__type": type_name, key: self.message, **self.extra}).encode()


def code_type(code: str) -> str:
    """The `__type` DynamoDB puts on an error (throttling comes from the service framework, not DynamoDB)."""
    return "com.amazon.coral.availability#ThrottlingException" if code == "ThrottlingException" else _PREFIX + code


def transaction_conflict(count: int, index: int) -> Refusal:
    """TransactionCanceledException with TransactionConflict at `index` of `count` items."""
    reasons: list[dict[str, str]] = [{"Code": "None"} for _ in range(count)]
    reasons[index] = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
    listed = ", ".join(reason["Code"] for reason in reasons)
    return Refusal(
        "TransactionCanceledException",
        f"Transaction cancelled, please refer cancellation reasons for specific reasons [{listed}]",
        {"CancellationReasons": reasons},
    )


def item_conflict() -> Refusal:
    """What a single-item write to an item inside a running transaction gets."""
    return Refusal(
        "TransactionConflictException",
        "Transaction is ongoing for the item",
    )


def throttled(rng: random.Random) -> Refusal:
    """One of DynamoDB's two throttling answers."""
    if rng.random() < 0.5:  # nosec B311 - fault injection, not security
        return Refusal(
            "ProvisionedThroughputExceededException",
            "The level of configured provisioned throughput for the table was exceeded."
            " Consider increasing your provisioning level with the UpdateTable API.",
        )
    return Refusal("ThrottlingException", "Rate of requests exceeds the allowed throughput.")
