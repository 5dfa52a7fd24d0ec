"""Calling DynamoDB: retries of its contention answers, outages as StoreUnavailable, pages, transactions.

Contention is answered the way DynamoDB answers it, by refusing: conflicts and throttling are
retried with jittered backoff within the store's time budget (`retries.Backoff`), and only then
reported as StoreUnavailable. Nothing here knows what a lease is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from scheduler.errors import StoreUnavailable
from scheduler.store.items import Item, string_attr
from scheduler.store.retries import RETRYABLE_CODES, Backoff, retryable_cancellation

_SNAKE = {
    "PutItem": "put_item",
    "GetItem": "get_item",
    "UpdateItem": "update_item",
    "DeleteItem": "delete_item",
    "Query": "query",
    "TransactWriteItems": "transact_write_items",
    "BatchGetItem": "batch_get_item",
    "BatchWriteItem": "batch_write_item",
    "Scan": "scan",
}
_OUTAGE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "ResourceNotFoundException",
    }
)


class TableClient:
    """One leases table (and its counters table) behind a botocore DynamoDB client."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        counters_table: str | None = None,
        retry: Backoff | None = None,
    ) -> None:
        self.table_name = table_name
        self.counters_table = counters_table
        self._client = client
        self._retry = retry or Backoff()

    @property
    def _errors(self) -> Any:
        """The client's modelled exceptions. Only an `except` that is reached reads this: botocore builds
        all of DynamoDB's exception classes on first access (5 ms of a cold start otherwise)."""
        return self._client.exceptions

    @property
    def client(self) -> Any:
        """The DynamoDB client, for utilities that keep their own table (idempotency records)."""
        return self._client

    def _call(self, operation: str, **request: Any) -> dict[str, Any]:
        """Run one DynamoDB operation, retrying contention and turning outages into StoreUnavailable."""
        from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

        method = getattr(self._client, _SNAKE[operation])
        attempts = self._retry.attempts()
        while True:
            try:
                response: dict[str, Any] = method(**request)
                return response
            except (self._errors.ConditionalCheckFailedException, self._errors.TransactionCanceledException):
                raise
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if code in RETRYABLE_CODES and attempts.wait():
                    continue  # not applied (a conflict with a transaction, throttling): the same request again
                if code in _OUTAGE_CODES or code in RETRYABLE_CODES:
                    raise StoreUnavailable("the lease store is unavailable; try again shortly") from error
                raise
            except ParamValidationError:
                raise  # our bug, not an outage
            except BotoCoreError as error:
                raise StoreUnavailable("the lease store cannot be reached; try again shortly") from error

    def _pages(self, operation: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every page of a Query or Scan, following LastEvaluatedKey."""
        request = dict(request)
        while True:
            page = self._call(operation, **request)
            yield page
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _transact(self, items: list[dict[str, Any]], limits_at: int = 1) -> int | None:
        """One TransactWriteItems; the position (from `limits_at`) of the first limit refused, or None.

        A refused condition on items[0] (the lease itself) is raised as ConditionalCheckFailedException.
        A transaction cancelled only for contention (TransactionConflict, throttling) applied nothing
        and is tried again with backoff, under a new token: a token belongs to one attempt, so that
        botocore's own resend of a timed-out attempt is a no-op instead of a second try.
        """
        attempts = self._retry.attempts()
        while True:
            try:
                self._call("TransactWriteItems", TransactItems=items, ClientRequestToken=uuid.uuid4().hex)
                return None
            except self._errors.TransactionCanceledException as cancelled:
                reasons = cancelled.response.get("CancellationReasons", [])
                for index, reason in enumerate(reasons):
                    if reason.get("Code") == "ConditionalCheckFailed":
                        if index >= limits_at:
                            return index - limits_at
                        if index == 0:
                            raise self._errors.ConditionalCheckFailedException(
                                {"Error": {"Code": "ConditionalCheckFailedException"}}, "TransactWriteItems"
                            ) from cancelled
                if not retryable_cancellation(reasons):
                    raise  # a reason no retry fixes (a validation error is our bug): the caller sees a 500
                if not attempts.wait():
                    raise StoreUnavailable(
                        "the lease store is too contended to take this lease now; try again shortly"
                    ) from cancelled

    def _lost_item(self, lost: Exception, lease_id: str) -> Item:
        """The lease as it was when a conditional write lost ({} if absent).

        DynamoDB returns it with the failure (ReturnValuesOnConditionCheckFailure=ALL_OLD) when the
        item exists; an implementation that does not (dynalite), or a cancelled transaction, leaves it
        out, and then it is read back (strongly consistent) once and kept on the error.
        """
        response: dict[str, Any] = getattr(lost, "response", {})
        if "Item" not in response:
            read = self._call(
                "GetItem", TableName=self.table_name, Key={"lease_id": string_attr(lease_id)}, ConsistentRead=True
            )
            response["Item"] = read.get("Item", {})
        item: Item = response["Item"]
        return item

    def _key(self, lease_id: str) -> dict[str, Any]:
        return {"TableName": self.table_name, "Key": {"lease_id": string_attr(lease_id)}}

    def _update(self, lease_id: str, expressions: dict[str, Any]) -> dict[str, Any]:
        """An UpdateItem of the lease answering the lease after it, or as it was when the condition failed."""
        return {
            **self._key(lease_id),
            **expressions,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _read_item(self, lease_id: str) -> Item:
        response = self._call("GetItem", **self._key(lease_id), ConsistentRead=True)
        item: Item = response.get("Item", {})
        return item

    def _counters(self) -> str:
        if not self.counters_table:
            raise RuntimeError("lease limits are configured but COUNTERS_TABLE is not")
        return self.counters_table
