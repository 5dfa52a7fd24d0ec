"""LeaseStore: the only code that speaks DynamoDB.

Every state change is one conditional write, so two actors (a DELETE, a sweep, the stream handler,
the reconciler) can never both act on one lease: the loser's condition fails and it walks away.

Item layout (key `lease_id`): the wire fields, with times as epoch seconds; `ttl` is the table's TTL
attribute; `live_shard` + `due_at` exist only while the lease is live and form the sparse GSI
`live-by-due`, which the sweep queries for `due_at <= now` and the list queries for `due_at > now`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.errors import InvalidRequest, LeaseConflict, LeaseNotFound, NotLeaseOwner, StoreUnavailable
from scheduler.models import GpuClass, Lease, LeaseStatus, ListFilter, WorkerKind
from scheduler.providers.base import ProvisionedWorker

LIVE_INDEX = "live-by-due"
# TTL must not delete a lease while someone holds a release claim on it: the claim pushes `ttl` out.
_CLAIM_TTL_SECONDS = 30 * 24 * 3600

Item = dict[str, dict[str, Any]]


class LeaseStateChanged(Exception):
    """A conditional write lost: another actor changed the lease first."""


@dataclass(frozen=True)
class Claim:
    """The right, held by one actor, to release a lease's worker and record how it ended."""

    lease: Lease
    claim_id: str
    outcome: LeaseStatus


@dataclass
class ReadCounters:
    """What the store has read, for benchmarks and cost tests."""

    requests: int = 0
    items: int = 0
    capacity_units: float = 0.0
    by_operation: dict[str, int] = field(default_factory=dict)


def _epoch(value: datetime) -> int:
    return int(value.timestamp())


def _from_epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(float(value)), UTC)


def _s(value: str | None) -> dict[str, Any]:
    return {"NULL": True} if value is None else {"S": value}


def _n(value: float | int) -> dict[str, str]:
    return {"N": str(value)}


def lease_from_item(item: Item) -> Lease:
    """Build the wire model from a DynamoDB item (table, index or stream image)."""

    def text(name: str) -> str | None:
        return item.get(name, {}).get("S")

    def number(name: str) -> str | None:
        return item.get(name, {}).get("N")

    released = number("released_epoch")
    cost = number("cost_per_hour")
    return Lease(
        lease_id=item["lease_id"]["S"],
        provider=item["provider"]["S"],
        kind=WorkerKind(item["kind"]["S"]),
        gpu=GpuClass(item["gpu"]["S"]),
        status=LeaseStatus(item["status"]["S"]),
        endpoint=text("endpoint"),
        created_at=_from_epoch(item["created_epoch"]["N"]),
        expires_at=_from_epoch(item["expires_epoch"]["N"]),
        released_at=_from_epoch(released) if released else None,
        provider_token=text("provider_token"),
        owner_id=text("owner_id"),
        correlation_id=text("correlation_id"),
        region=text("region"),
        ttl_seconds=int(item["ttl_seconds"]["N"]),
        cost_per_hour=float(cost) if cost else None,
    )


class LeaseStore:
    """Leases in DynamoDB, changed only through conditional writes."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        shards: int = 1,
        retention_seconds: int = 7 * 24 * 3600,
        release_claim_seconds: int = 120,
    ) -> None:
        self.table_name = table_name
        self._client = client
        self._shards = shards
        self._retention = retention_seconds
        self._claim_seconds = release_claim_seconds
        self.reads = ReadCounters()
        self._errors = client.exceptions

    # --- acquire -------------------------------------------------------------------------------

    def create_pending(self, lease: Lease) -> None:
        """Record the lease as `pending` before any provider is asked for a worker."""
        self._call(
            "PutItem",
            TableName=self.table_name,
            Item=self.pending_item(lease),
            ConditionExpression="attribute_not_exists(lease_id)",
        )

    def pending_item(self, lease: Lease) -> Item:
        """The DynamoDB item of a new `pending` lease (live: it carries the sweep index keys)."""
        item: Item = {
            "lease_id": _s(lease.lease_id),
            "provider": _s(lease.provider),
            "kind": _s(lease.kind.value),
            "gpu": _s(lease.gpu.value),
            "status": _s(LeaseStatus.PENDING.value),
            "created_epoch": _n(_epoch(lease.created_at)),
            "expires_epoch": _n(_epoch(lease.expires_at)),
            "ttl_seconds": _n(lease.ttl_seconds),
            "ttl": _n(_epoch(lease.expires_at)),
            "live_shard": _s(self._shard_of(lease.lease_id)),
            "due_at": _n(_epoch(lease.expires_at)),
        }
        for name in ("owner_id", "correlation_id", "region"):
            value = getattr(lease, name)
            if value is not None:
                item[name] = _s(value)
        return item

    def activate(self, lease_id: str, provider: str, worker: ProvisionedWorker) -> Lease:
        """Move a `pending` lease to `active` with its worker; LeaseStateChanged if it is no longer pending."""
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":active": _s(LeaseStatus.ACTIVE.value),
            ":pending": _s(LeaseStatus.PENDING.value),
            ":provider": _s(provider),
            ":token": _s(worker.token),
        }
        sets = ["#status = :active", "provider = :provider", "provider_token = :token"]
        if worker.endpoint is not None:
            values[":endpoint"] = _s(worker.endpoint)
            sets.append("endpoint = :endpoint")
        if worker.cost_per_hour is not None:
            values[":cost"] = _n(worker.cost_per_hour)
            sets.append("cost_per_hour = :cost")
        try:
            response = self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key={"lease_id": _s(lease_id)},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="#status = :pending",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            raise LeaseStateChanged(lease_id) from lost
        return lease_from_item(response["Attributes"])

    def fail_pending(self, lease_id: str, now: datetime) -> None:
        """End a `pending` lease as `failed` (provision failed and its worker was cleaned up)."""
        # A lost condition means someone else (sweep, reconciler) already ended it.
        with contextlib.suppress(LeaseStateChanged):
            self._finish(lease_id, now, LeaseStatus.FAILED, "#status = :expected", {":expected": _s("pending")})

    # --- reads ---------------------------------------------------------------------------------

    def get(self, lease_id: str) -> Lease:
        """The lease, live or ended within the retention period; LeaseNotFound otherwise."""
        response = self._call("GetItem", TableName=self.table_name, Key={"lease_id": _s(lease_id)}, ConsistentRead=True)
        if "Item" not in response:
            raise LeaseNotFound(f"lease {lease_id} not found")
        return lease_from_item(response["Item"])

    def list_live(self, query: ListFilter, now: datetime) -> tuple[list[Lease], str | None]:
        """One page of live leases (one Query); `next_token` continues it."""
        shard, start_key = self._decode_token(query.next_token)
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":shard": _s(str(shard)),
            ":now": _n(_epoch(now)),
            ":pending": _s("pending"),
            ":active": _s("active"),
        }
        filters = ["#status IN (:pending, :active)"]
        for name in ("owner_id", "kind", "provider"):
            value = getattr(query, name)
            if value is not None:
                names[f"#{name}"] = name
                values[f":{name}"] = _s(str(value))
                filters.append(f"#{name} = :{name}")
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": LIVE_INDEX,
            "KeyConditionExpression": "live_shard = :shard AND due_at > :now",
            "FilterExpression": " AND ".join(filters),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "Limit": query.limit,
        }
        if start_key:
            request["ExclusiveStartKey"] = start_key
        response = self._call("Query", **request)
        leases = [lease_from_item(item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        if last:
            return leases, self._encode_token(shard, last)
        if shard + 1 < self._shards:
            return leases, self._encode_token(shard + 1, None)
        return leases, None

    def live_leases(self) -> Iterator[Lease]:
        """Every live lease (pending, active, releasing), for the reconciler."""
        for shard in range(self._shards):
            yield from self._query_index("live_shard = :shard", {":shard": _s(str(shard))}, page_size=500)

    def due_leases(self, now: datetime, limit: int = 500) -> Iterator[Lease]:
        """Live leases whose `due_at` has passed: expired ones and stale release claims."""
        count = 0
        for shard in range(self._shards):
            for lease in self._query_index(
                "live_shard = :shard AND due_at <= :now",
                {":shard": _s(str(shard)), ":now": _n(_epoch(now))},
                page_size=min(limit, 500),
            ):
                yield lease
                count += 1
                if count >= limit:
                    return

    # --- release claims ------------------------------------------------------------------------

    def claim_release(self, lease_id: str, owner: str | None, now: datetime) -> Claim:
        """Claim an `active` lease for a caller's release, checking the owner in the same write."""
        values = {":owner": _s(owner or "\u0000")}
        owner_ok = "(attribute_not_exists(owner_id) OR owner_id = :owner)"
        # An expired lease the sweep has not reached yet is already over for its caller (404, as
        # renew says); the sweep releases its worker and records it as `expired`.
        condition = f"#status = :active AND expires_epoch > :now AND {owner_ok}"
        try:
            return self._claim(lease_id, now, LeaseStatus.RELEASED, condition, values, fresh_outcome=True)
        except self._errors.ConditionalCheckFailedException as lost:
            old = lost.response.get("Item")
            if old is None:
                raise LeaseNotFound(f"lease {lease_id} not found") from lost
            status = old["status"]["S"]
            if status != LeaseStatus.ACTIVE:
                raise LeaseNotFound(f"lease {lease_id} is not active (status {status})") from lost
            if int(old["expires_epoch"]["N"]) <= _epoch(now):
                raise LeaseNotFound(f"lease {lease_id} has expired") from lost
            raise NotLeaseOwner(f"lease {lease_id} belongs to another owner") from lost

    def claim_due(self, lease_id: str, now: datetime) -> Claim | None:
        """Claim a lease whose `due_at` has passed (expired, or a release claim gone stale)."""
        try:
            return self._claim(
                lease_id,
                now,
                LeaseStatus.EXPIRED,
                "due_at <= :now AND #status IN (:pending, :active, :releasing)",
                {":pending": _s("pending"), ":releasing": _s("releasing")},
                fresh_outcome=False,
            )
        except self._errors.ConditionalCheckFailedException:
            return None

    def claim_failed(self, lease_id: str, now: datetime, *, status: LeaseStatus, token: str | None) -> Claim | None:
        """Claim a lease the reconciler found broken (ghost `active`, or `pending` past its deadline)."""
        condition = "#status = :expected"
        values: dict[str, Any] = {":expected": _s(status.value)}
        if token is not None:
            condition += " AND provider_token = :token"
            values[":token"] = _s(token)
        try:
            return self._claim(lease_id, now, LeaseStatus.FAILED, condition, values, fresh_outcome=True)
        except self._errors.ConditionalCheckFailedException:
            return None

    def reclaim_ttl_deleted(self, old_image: Item, now: datetime) -> Claim | None:
        """Write a live lease that TTL deleted back as `releasing`, so its release is claimed and recorded."""
        claim_id = uuid.uuid4().hex
        item = dict(old_image)
        item.update(
            {
                "status": _s(LeaseStatus.RELEASING.value),
                "claim_id": _s(claim_id),
                "release_outcome": _s(LeaseStatus.EXPIRED.value),
                "live_shard": _s(self._shard_of(old_image["lease_id"]["S"])),
                "due_at": _n(_epoch(now) + self._claim_seconds),
                "ttl": _n(_epoch(now) + _CLAIM_TTL_SECONDS),
            }
        )
        try:
            self._call(
                "PutItem", TableName=self.table_name, Item=item, ConditionExpression="attribute_not_exists(lease_id)"
            )
        except self._errors.ConditionalCheckFailedException:
            return None
        return Claim(lease_from_item(item), claim_id, LeaseStatus.EXPIRED)

    def finish_release(self, claim: Claim, now: datetime) -> Lease:
        """Record the claimed release as done; only the claim's holder can."""
        return self._finish(
            claim.lease.lease_id,
            now,
            claim.outcome,
            "#status = :releasing AND claim_id = :claim",
            {":releasing": _s("releasing"), ":claim": _s(claim.claim_id)},
        )

    # --- renew ---------------------------------------------------------------------------------

    def renew(self, lease_id: str, owner: str | None, ttl_seconds: int | None, now: datetime) -> Lease:
        """Push `expires_at` (and the TTL) to now + ttl in one conditional write."""
        # Whole seconds, rounded up so a renewal is never shorter than asked.
        start = math.ceil(now.timestamp())
        values: dict[str, Any] = {
            ":now": _n(_epoch(now)),
            ":start": _n(start),
            ":active": _s("active"),
            ":owner": _s(owner or "\u0000"),
        }
        if ttl_seconds is None:
            expires = ":start + ttl_seconds"
            sets = f"expires_epoch = {expires}, due_at = {expires}, #ttl = {expires}"
        else:
            del values[":start"]
            values[":ttl_seconds"] = _n(ttl_seconds)
            values[":expires"] = _n(start + ttl_seconds)
            sets = "expires_epoch = :expires, due_at = :expires, #ttl = :expires, ttl_seconds = :ttl_seconds"
        try:
            response = self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key={"lease_id": _s(lease_id)},
                UpdateExpression=f"SET {sets}",
                ConditionExpression=(
                    "#status = :active AND expires_epoch > :now"
                    " AND (attribute_not_exists(owner_id) OR owner_id = :owner)"
                ),
                ExpressionAttributeNames={"#status": "status", "#ttl": "ttl"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            old = lost.response.get("Item")
            if old is None:
                raise LeaseNotFound(f"lease {lease_id} not found") from lost
            status = old["status"]["S"]
            if status in (LeaseStatus.PENDING, LeaseStatus.RELEASING):
                raise LeaseConflict(f"lease {lease_id} is {status}; it cannot be renewed now") from lost
            if status != LeaseStatus.ACTIVE or int(old["expires_epoch"]["N"]) <= _epoch(now):
                raise LeaseNotFound(f"lease {lease_id} has ended (status {status})") from lost
            raise NotLeaseOwner(f"lease {lease_id} belongs to another owner") from lost
        return lease_from_item(response["Attributes"])

    # --- internals -----------------------------------------------------------------------------

    def _claim(
        self,
        lease_id: str,
        now: datetime,
        outcome: LeaseStatus,
        condition: str,
        values: dict[str, Any],
        *,
        fresh_outcome: bool,
    ) -> Claim:
        claim_id = uuid.uuid4().hex
        outcome_expr = ":outcome" if fresh_outcome else "if_not_exists(release_outcome, :outcome)"
        response = self._call(
            "UpdateItem",
            TableName=self.table_name,
            Key={"lease_id": _s(lease_id)},
            UpdateExpression=(
                f"SET #status = :releasing_new, claim_id = :claim, release_outcome = {outcome_expr},"
                " due_at = :claim_due, #ttl = :claim_ttl"
            ),
            ConditionExpression=f"attribute_exists(lease_id) AND {condition}",
            ExpressionAttributeNames={"#status": "status", "#ttl": "ttl"},
            ExpressionAttributeValues={
                **values,
                **({":now": _n(_epoch(now))} if ":now" in condition else {}),
                **({":active": _s("active")} if ":active" in condition else {}),
                ":releasing_new": _s("releasing"),
                ":claim": _s(claim_id),
                ":outcome": _s(outcome.value),
                ":claim_due": _n(_epoch(now) + self._claim_seconds),
                ":claim_ttl": _n(_epoch(now) + _CLAIM_TTL_SECONDS),
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        item = response["Attributes"]
        return Claim(lease_from_item(item), claim_id, LeaseStatus(item["release_outcome"]["S"]))

    def _finish(
        self, lease_id: str, now: datetime, final: LeaseStatus, condition: str, values: dict[str, Any]
    ) -> Lease:
        try:
            response = self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key={"lease_id": _s(lease_id)},
                UpdateExpression=(
                    "SET #status = :final, released_epoch = :now, #ttl = :retain"
                    " REMOVE live_shard, due_at, claim_id, release_outcome"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status", "#ttl": "ttl"},
                ExpressionAttributeValues={
                    **values,
                    ":final": _s(final.value),
                    ":now": _n(_epoch(now)),
                    ":retain": _n(_epoch(now) + self._retention),
                },
                ReturnValues="ALL_NEW",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            raise LeaseStateChanged(lease_id) from lost
        return lease_from_item(response["Attributes"])

    def _query_index(self, key_condition: str, values: dict[str, Any], page_size: int) -> Iterator[Lease]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": LIVE_INDEX,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": values,
            "Limit": page_size,
        }
        while True:
            response = self._call("Query", **request)
            for item in response.get("Items", []):
                yield lease_from_item(item)
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _shard_of(self, lease_id: str) -> str:
        return str(uuid.UUID(lease_id).int % self._shards) if self._shards > 1 else "0"

    def _encode_token(self, shard: int, key: Item | None) -> str:
        raw = json.dumps({"s": shard, "k": key}, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _decode_token(self, token: str | None) -> tuple[int, Item | None]:
        if not token:
            return 0, None
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            shard, key = int(decoded["s"]), decoded["k"]
            if not 0 <= shard < self._shards or not (key is None or self._is_index_key(key, shard)):
                raise ValueError("not a key of this index")
            return shard, key
        except (ValueError, KeyError, TypeError, binascii.Error) as error:
            raise InvalidRequest("next_token is not a token this service issued") from error

    @staticmethod
    def _is_index_key(key: object, shard: int) -> bool:
        # Only a key this index could have returned goes back to DynamoDB as ExclusiveStartKey.
        return (
            isinstance(key, dict)
            and set(key) == {"lease_id", "live_shard", "due_at"}
            and isinstance(key["lease_id"], dict)
            and isinstance(key["lease_id"].get("S"), str)
            and key["live_shard"] == {"S": str(shard)}
            and isinstance(key["due_at"], dict)
            and str(key["due_at"].get("N", "")).isdigit()
        )

    def _call(self, operation: str, **request: Any) -> dict[str, Any]:
        """Run one DynamoDB operation, counting reads and turning outages into StoreUnavailable."""
        from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

        request.setdefault("ReturnConsumedCapacity", "TOTAL")
        method = getattr(self._client, _SNAKE[operation])
        try:
            response: dict[str, Any] = method(**request)
        except self._errors.ConditionalCheckFailedException:
            raise
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in _OUTAGE_CODES:
                raise StoreUnavailable("the lease store is unavailable; try again shortly") from error
            raise
        except ParamValidationError:
            raise  # our bug, not an outage
        except BotoCoreError as error:
            raise StoreUnavailable("the lease store cannot be reached; try again shortly") from error
        if operation in ("GetItem", "Query"):
            self.reads.requests += 1
            self.reads.items += response.get("Count", 1 if "Item" in response else 0)
            self.reads.capacity_units += float(response.get("ConsumedCapacity", {}).get("CapacityUnits", 0.0))
        self.reads.by_operation[operation] = self.reads.by_operation.get(operation, 0) + 1
        return response


_SNAKE = {
    "PutItem": "put_item",
    "GetItem": "get_item",
    "UpdateItem": "update_item",
    "Query": "query",
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
