"""What stands in front of moto so the embedded DynamoDB behaves like DynamoDB under concurrency.

moto applies a conditional write as a read, a check and a write, and rolls a failed transaction back
by restoring whole tables; under concurrent requests neither is atomic. Instead of one lock over all
requests (which also hid every conflict DynamoDB would answer), this front gives:

- **per-item locks** derived from each request's keys: two writes to one item run one after the
  other, writes to different items do not wait for each other;
- **transactions that conflict as DynamoDB's do**: a TransactWriteItems holds all its items' locks
  (taken all at once) while it runs; a single-item write to one of them is refused with
  `TransactionConflictException`, another transaction touching one of them is cancelled with reason
  `TransactionConflict`; the transaction checks every condition before it writes anything, and
  undoes only its own items if a write fails;
- **ClientRequestToken** as DynamoDB documents it: the same token within 10 minutes of a successful
  call returns success without applying anything again; with other items it is
  `IdempotentParameterMismatchException`; while the first is still running, `TransactionInProgressException`;
- **per-table reader/writer locks** around moto's own data structures, so a Query never iterates a
  table while a write changes it (moto's reads are not safe against concurrent mutation);
- **opt-in faults** (`DYNAMODB_FAULTS=conflict=0.1,throttle=0.05`): a data-plane request is answered,
  before anything is applied, with DynamoDB's own wire shapes of `TransactionConflictException`
  (single-item writes), `TransactionCanceledException` with a `TransactionConflict` reason
  (transactions), `ProvisionedThroughputExceededException` or `ThrottlingException` (any).

The locks are `dynamodb_locks`'s; the faults, and DynamoDB's refusals they answer with, `dynamodb_faults`'s.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from devstack.dynamodb_faults import FaultCounts, Faults, Refusal, item_conflict, throttled, transaction_conflict
from devstack.dynamodb_locks import ITEMS, TABLES, Key

TOKEN_WINDOW_SECONDS = 600.0  # DynamoDB: a client request token is valid for 10 minutes
_JSON = "application/x-amz-json-1.0"
_SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
_READS = frozenset({"GetItem", "Query", "Scan", "DescribeTable", "DescribeTimeToLive"})
_DATA_PLANE = _SINGLE_WRITES | {
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactWriteItems",
    "TransactGetItems",
}
_CATALOG_WRITES = frozenset({"CreateTable", "DeleteTable", "UpdateTable", "UpdateTimeToLive", "RestoreTableFromBackup"})


# --- client request tokens ---------------------------------------------------------------------


class ClientTokens:
    """TransactWriteItems' ClientRequestToken: one successful application per token and window."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, float | None]] = {}  # token -> (fingerprint, completed at | None)

    def begin(self, token: str, fingerprint: str) -> bool:
        """True to run the request now; False when it already succeeded (answer success, apply nothing)."""
        now = self._clock()
        with self._lock:
            seen = self._seen.get(token)
            if seen is not None:
                known, completed = seen
                if completed is None or now - completed < TOKEN_WINDOW_SECONDS:
                    if known != fingerprint:
                        raise Refusal(
                            "IdempotentParameterMismatchException",
                            "The request uses the same client token as a previous, but non-identical request.",
                        )
                    if completed is None:
                        raise Refusal(
                            "TransactionInProgressException",
                            "The transaction with the given request token is already in progress.",
                        )
                    return False
            self._seen[token] = (fingerprint, None)
            return True

    def finish(self, token: str, *, succeeded: bool) -> None:
        """Record the outcome: a success is remembered for the window; a failure applied nothing and is forgotten."""
        with self._lock:
            if succeeded:
                fingerprint = self._seen[token][0]
                self._seen[token] = (fingerprint, self._clock())
            else:
                self._seen.pop(token, None)
            if len(self._seen) > 10_000:  # forget what is past its window
                cutoff = self._clock() - TOKEN_WINDOW_SECONDS
                for stale in [t for t, (_, done) in self._seen.items() if done is not None and done < cutoff]:
                    del self._seen[stale]


# --- the WSGI front ----------------------------------------------------------------------------


class DynamoDBFront:
    """WSGI middleware in front of moto's app: locks, transaction tokens, faults (see the module doc)."""

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        key_names: Callable[[str], tuple[str, ...]],
        faults: Faults | None = None,
        tokens: ClientTokens | None = None,
    ) -> None:
        self._app = app
        self._key_names = key_names  # table name -> its key attribute names (hash, range)
        self.faults = faults or Faults()
        self.injected = FaultCounts()
        self._rng = random.Random(self.faults.seed)  # noqa: S311  # nosec B311 - fault injection, not security
        self._tokens = tokens or ClientTokens()

    def set_faults(self, faults: Faults) -> None:
        """Inject `faults` from now on (the stack turns them on once its tables are restored)."""
        self._rng = random.Random(faults.seed)  # noqa: S311  # nosec B311 - fault injection, not security
        self.faults = faults

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        service, _, operation = str(environ.get("HTTP_X_AMZ_TARGET", "")).partition(".")
        if not service.startswith("DynamoDB_"):  # DynamoDB Streams and anything else: moto as it is
            return list(self._app(environ, start_response))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        try:
            request = json.loads(raw or b"{}")
            self._inject(operation, request)
            return self._dispatch(operation, request, environ, start_response)
        except Refusal as refusal:
            start_response(
                f"{refusal.status} Bad Request",
                [("Content-Type", _JSON), ("x-amzn-RequestId", uuid.uuid4().hex)],
            )
            return [refusal.body()]
        except (ValueError, KeyError, TypeError):
            # Not a request the front can read (bad JSON, unknown table): moto answers it as it would.
            environ["wsgi.input"] = io.BytesIO(raw)
            return list(self._app(environ, start_response))

    def _inject(self, operation: str, request: dict[str, Any]) -> None:
        if not self.faults.active or operation not in _DATA_PLANE:
            return
        roll = self._rng.random()
        if roll < self.faults.throttle:
            refusal = throttled(self._rng)
        elif roll < self.faults.throttle + self.faults.conflict and operation in _SINGLE_WRITES:
            refusal = item_conflict()
        elif roll < self.faults.throttle + self.faults.conflict and operation == "TransactWriteItems":
            count = len(request.get("TransactItems") or [None])
            refusal = transaction_conflict(count, self._rng.randrange(count))
        else:
            return
        self.injected.add(refusal.code)
        raise refusal

    def _dispatch(
        self, operation: str, request: dict[str, Any], environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> list[bytes]:
        def moto() -> list[bytes]:
            return list(self._app(environ, start_response))

        if operation in _SINGLE_WRITES:
            table = request["TableName"]
            source = request.get("Item") if operation == "PutItem" else request.get("Key")
            with ITEMS.write([self._key(table, source or {})]), TABLES.exclusive([table]):
                return moto()
        if operation == "BatchWriteItem":
            keys: list[Key] = []
            batch = request.get("RequestItems") or {}
            for table, writes in batch.items():
                for write in writes:
                    put, delete = write.get("PutRequest") or {}, write.get("DeleteRequest") or {}
                    keys.append(self._key(table, put.get("Item") or delete.get("Key")))
            with ITEMS.write(keys), TABLES.exclusive(batch):
                return moto()
        if operation == "TransactWriteItems":
            return self._transact(request, moto, start_response)
        if operation in _READS:
            with TABLES.shared([request["TableName"]]):
                return moto()
        if operation == "BatchGetItem":
            with TABLES.shared(request.get("RequestItems") or {}):
                return moto()
        if operation == "TransactGetItems":
            read = [next(iter(item.values()))["TableName"] for item in request.get("TransactItems") or []]
            with TABLES.shared(read):
                return moto()
        if operation in _CATALOG_WRITES:
            with TABLES.catalog.exclusive():
                return moto()
        with TABLES.catalog.shared():
            return moto()

    def _transact(
        self, request: dict[str, Any], moto: Callable[[], list[bytes]], start_response: Callable[..., Any]
    ) -> list[bytes]:
        items = request.get("TransactItems") or []
        keys: list[Key] = []
        for item in items:
            operation, body = next(iter(item.items()))
            keys.append(self._key(body["TableName"], body.get("Item") if operation == "Put" else body.get("Key")))
        token = request.get("ClientRequestToken")
        fingerprint = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
        if token and not self._tokens.begin(token, fingerprint):
            # DynamoDB answers a repeat of a completed token with success and changes nothing.
            start_response("200 OK", [("Content-Type", _JSON), ("x-amzn-RequestId", uuid.uuid4().hex)])
            return [b"{}"]
        succeeded = False
        try:
            with ITEMS.transaction(keys):
                answer = moto()
            succeeded = _status_of(answer) == 200
            return answer
        finally:
            if token:
                self._tokens.finish(token, succeeded=succeeded)

    def _key(self, table: str, source: dict[str, Any] | None) -> Key:
        names = self._key_names(table)
        key = {name: (source or {}).get(name) for name in names}
        return table, json.dumps(key, sort_keys=True)


def _status_of(answer: list[bytes]) -> int:
    # The status is in start_response, which moto already called; its body tells success apart:
    # a successful TransactWriteItems answers a JSON object without "__type".
    try:
        body = json.loads(b"".join(answer) or b"{}")
    except ValueError:
        return 500
    return 400 if isinstance(body, dict) and "__type" in body else 200


# --- transactions inside moto ------------------------------------------------------------------


def install_item_level_transactions() -> None:
    """Replace moto's TransactWriteItems (whole-table copy and restore) with one that touches only its items.

    moto's version snapshots every table it touches and restores the snapshot on failure, which
    would undo other clients' writes made meanwhile. This one runs with all its items locked by the
    front (ITEMS.transaction): it checks every condition first, cancels with the reasons if any
    fails, then applies each write under its table's writer lock and, should a write fail, puts back
    its own items only.
    """
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend.transact_write_items, "item_level", False):
        return
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign,assignment]


def _transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    steps: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException()
        operation, body = next(iter(entry.items()))
        if operation not in ("ConditionCheck", "Put", "Delete", "Update"):
            raise ValueError(f"unsupported transaction operation {operation}")
        table_name = body["TableName"]
        table = backend.get_table(table_name)
        if operation == "Put":
            key_names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
            key = {name: body["Item"][name] for name in key_names}
        else:
            key = body["Key"]
        marker = (table_name, json.dumps(key, sort_keys=True))
        if marker in seen:
            raise MultipleTransactionsException()
        seen.add(marker)
        steps.append((operation, body, table_name, key))

    # Every condition first: nothing is written unless all hold.
    reasons: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    originals: list[Any] = []
    for _operation, body, table_name, key in steps:
        with TABLES.shared([table_name]):
            current = backend.get_item(table_name, key)
            originals.append(copy.deepcopy(current))
        condition = body.get("ConditionExpression")
        if condition is not None and not get_filter_expression(
            condition, body.get("ExpressionAttributeNames"), body.get("ExpressionAttributeValues")
        ).expr(current):
            old = None
            if body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None:
                old = current.to_json()["Attributes"]
            reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed().message, old))
        else:
            reasons.append((None, None, None))
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)

    applied: list[int] = []
    try:
        for index, (operation, body, table_name, key) in enumerate(steps):
            with TABLES.exclusive([table_name]):
                names, values = body.get("ExpressionAttributeNames"), body.get("ExpressionAttributeValues")
                if operation == "Put":
                    backend.put_item(table_name, body["Item"])
                elif operation == "Delete":
                    backend.delete_item(table_name, key)
                elif operation == "Update":
                    backend.update_item(
                        table_name,
                        key,
                        update_expression=body["UpdateExpression"],
                        expression_attribute_names=names,
                        expression_attribute_values=values,
                    )
            applied.append(index)
    except Exception:
        for index in reversed(applied):
            _, _, table_name, key = steps[index]
            with TABLES.exclusive([table_name]):
                table = backend.get_table(table_name)
                if originals[index] is None:
                    with contextlib.suppress(Exception):
                        backend.delete_item(table_name, key)
                else:
                    table.put_item(originals[index].to_json()["Attributes"])
        raise


_transact_write_items.item_level = True  # type: ignore[attr-defined]
