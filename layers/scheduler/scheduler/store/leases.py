"""LeaseStore: the only code that speaks DynamoDB.

Every state change is one conditional write, so two actors (a DELETE, a sweep, the stream handler,
the reconciler) can never both act on one lease: the loser's condition fails and it walks away.

Item layout (key `lease_id`): the wire fields, with times as epoch seconds; `ttl` is the table's TTL
attribute; `live_shard` + `due_at` exist only while the lease is live and form the sparse GSI
`live-by-due`, which the sweep queries for `due_at <= now` and the list queries for `due_at > now`.

Contention is answered the way DynamoDB answers it, by refusing: conflicts and throttling are
retried with jittered backoff within the store's time budget (`retries.Backoff`), and only then
reported as StoreUnavailable.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.errors import InvalidRequest, LeaseConflict, LeaseNotFound, NotLeaseOwner, StoreUnavailable
from scheduler.models import Lease, LeaseStatus, ListFilter, is_lease_id
from scheduler.providers.base import ProvisionedWorker
from scheduler.store import counters
from scheduler.store.counters import CounterState, Limit, LimitReached
from scheduler.store.items import Item, epoch, lease_from_item, number_attr, string_attr
from scheduler.store.retries import RETRYABLE_CODES, Backoff, retryable_cancellation

LIVE_INDEX = "live-by-due"
MAX_FAILURE_REASON_CHARS = 1000
# TTL must not delete a lease while someone holds a release claim on it: the claim pushes `ttl` out.
_CLAIM_TTL_SECONDS = 30 * 24 * 3600


class LeaseStateChanged(Exception):
    """A conditional write lost: another actor changed the lease first."""


@dataclass(frozen=True)
class Claim:
    """The right, held by one actor, to release a lease's worker and record how it ended."""

    lease: Lease
    claim_id: str
    outcome: LeaseStatus
    held_counters: tuple[str, ...] = ()


@dataclass
class ReadCounters:
    """What the store has read, for benchmarks and cost tests."""

    requests: int = 0
    items: int = 0
    capacity_units: float = 0.0
    by_operation: dict[str, int] = field(default_factory=dict)


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
        counters_table: str | None = None,
        retry: Backoff | None = None,
    ) -> None:
        self.table_name = table_name
        self.counters_table = counters_table
        self._client = client
        self._shards = shards
        self._retention = retention_seconds
        self._claim_seconds = release_claim_seconds
        self.reads = ReadCounters()
        self._errors = client.exceptions
        self._retry = retry or Backoff()

    @property
    def client(self) -> Any:
        """The DynamoDB client, for utilities that keep their own table (idempotency records)."""
        return self._client

    # --- acquire -------------------------------------------------------------------------------

    def create_pending(self, lease: Lease, limits: Sequence[Limit] = ()) -> None:
        """Record the lease as `pending` before any provider is asked for a worker.

        With limits, the same transaction takes a slot of each; LimitReached names the full one
        and nothing is written.
        """
        item = self.pending_item(lease)
        put = {"TableName": self.table_name, "Item": item, "ConditionExpression": "attribute_not_exists(lease_id)"}
        if not limits:
            try:
                self._call("PutItem", **put, ReturnValuesOnConditionCheckFailure="ALL_OLD")
            except self._errors.ConditionalCheckFailedException as lost:
                # botocore retried a put whose first attempt landed (its answer timed out): that row is ours.
                if self._lost_item(lost, lease.lease_id).get("created_epoch") != item["created_epoch"]:
                    raise
            return
        held = counters.held_set(limit.counter for limit in limits)
        if held is not None:
            item["held_counters"] = held
        self._transact([{"Put": put}, *(counters.take(self._counters(), limit) for limit in limits)], limits)

    def move_slot(
        self, lease_id: str, held: tuple[str, ...], give_back: str | None, take: Limit | None
    ) -> tuple[str, ...]:
        """Swap the provider slot a `pending` lease holds (failover); returns the counters it now holds."""
        now_held = tuple(sorted({*held, *([take.counter] if take else [])} - {give_back}))
        new_set = counters.held_set(now_held)
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"lease_id": string_attr(lease_id)},
            "ConditionExpression": "#status = :pending",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {":pending": string_attr("pending")},
            "UpdateExpression": "REMOVE held_counters",
        }
        if new_set is not None:
            update["UpdateExpression"] = "SET held_counters = :held"
            update["ExpressionAttributeValues"][":held"] = new_set
        items: list[dict[str, Any]] = [{"Update": update}]
        if give_back:
            items.append(counters.give_back(self._counters(), give_back))
        if take:
            items.append(counters.take(self._counters(), take))
        try:
            self._transact(items, [take] if take else [], offset=len(items) - (1 if take else 0))
        except self._errors.ConditionalCheckFailedException as lost:
            raise LeaseStateChanged(lease_id) from lost
        return now_held

    def pending_item(self, lease: Lease) -> Item:
        """The DynamoDB item of a new `pending` lease (live: it carries the sweep index keys)."""
        item: Item = {
            "lease_id": string_attr(lease.lease_id),
            "provider": string_attr(lease.provider),
            "kind": string_attr(lease.kind.value),
            "gpu": string_attr(lease.gpu.value),
            "status": string_attr(LeaseStatus.PENDING.value),
            "created_epoch": number_attr(epoch(lease.created_at)),
            "expires_epoch": number_attr(epoch(lease.expires_at)),
            "ttl_seconds": number_attr(lease.ttl_seconds),
            "ttl": number_attr(epoch(lease.expires_at)),
            "live_shard": string_attr(self._shard_of(lease.lease_id)),
            "due_at": number_attr(epoch(lease.expires_at)),
        }
        for name in ("owner_id", "correlation_id", "region"):
            value = getattr(lease, name)
            if value is not None:
                item[name] = string_attr(value)
        return item

    def activate(self, lease_id: str, provider: str, worker: ProvisionedWorker) -> Lease:
        """Move a `pending` lease to `active` with its worker; LeaseStateChanged if it is no longer pending."""
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":active": string_attr(LeaseStatus.ACTIVE.value),
            ":pending": string_attr(LeaseStatus.PENDING.value),
            ":provider": string_attr(provider),
            ":token": string_attr(worker.token),
        }
        sets = ["#status = :active", "provider = :provider", "provider_token = :token"]
        if worker.endpoint is not None:
            values[":endpoint"] = string_attr(worker.endpoint)
            sets.append("endpoint = :endpoint")
        if worker.cost_per_hour is not None:
            values[":cost"] = number_attr(worker.cost_per_hour)
            sets.append("cost_per_hour = :cost")
        try:
            response = self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key={"lease_id": string_attr(lease_id)},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="#status = :pending",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            if old.get("status", {}).get("S") == "active" and old.get("provider_token", {}).get("S") == worker.token:
                return lease_from_item(old)  # a retry of our own write, which had landed
            raise LeaseStateChanged(lease_id) from lost
        return lease_from_item(response["Attributes"])

    def fail_pending(self, lease_id: str, now: datetime, held: tuple[str, ...] = (), reason: str | None = None) -> None:
        """End a `pending` lease as `failed` (provision failed and its worker was cleaned up), recording why."""
        # A lost condition means someone else (sweep, reconciler) already ended it.
        with contextlib.suppress(LeaseStateChanged):
            self._finish(
                lease_id,
                now,
                LeaseStatus.FAILED,
                "#status = :expected",
                {":expected": string_attr("pending")},
                held,
                reason=reason,
            )

    # --- reads ---------------------------------------------------------------------------------

    def get(self, lease_id: str) -> Lease:
        """The lease, live or ended within the retention period; LeaseNotFound otherwise."""
        response = self._call(
            "GetItem", TableName=self.table_name, Key={"lease_id": string_attr(lease_id)}, ConsistentRead=True
        )
        if "Item" not in response:
            raise LeaseNotFound(f"lease {lease_id} not found")
        return lease_from_item(response["Item"])

    def list_live(self, query: ListFilter, now: datetime) -> tuple[list[Lease], str | None]:
        """One page of live leases (one Query); `next_token` continues it.

        As DynamoDB pages, a page may be short or even empty while `next_token` is set (the filter
        runs after `Limit` items were read); only a None token means the listing is done.
        """
        shard, start_key = self._decode_token(query.next_token)
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":shard": string_attr(str(shard)),
            ":now": number_attr(epoch(now)),
            ":pending": string_attr("pending"),
            ":active": string_attr("active"),
        }
        # Expiry is filtered on `expires_epoch` (due_at of pending and active leases), not in the key
        # condition: a continuation's start key must satisfy the key condition (DynamoDB refuses it
        # otherwise), and its `due_at` may have passed since the page before — so a continuation reads
        # from its start key on (`due_at >= start`) and drops what has expired meanwhile.
        key_condition = "live_shard = :shard AND due_at > :now"
        if start_key:
            key_condition = "live_shard = :shard AND due_at >= :start"
            values[":start"] = start_key["due_at"]
        filters = ["#status IN (:pending, :active)", "expires_epoch > :now"]
        for name in ("owner_id", "kind", "provider"):
            value = getattr(query, name)
            if value is not None:
                names[f"#{name}"] = name
                values[f":{name}"] = string_attr(str(value))
                filters.append(f"#{name} = :{name}")
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": LIVE_INDEX,
            "KeyConditionExpression": key_condition,
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
            yield from self._query_index("live_shard = :shard", {":shard": string_attr(str(shard))}, page_size=500)

    def due_leases(self, now: datetime, limit: int = 500) -> Iterator[Lease]:
        """Live leases whose `due_at` has passed: expired ones and stale release claims."""
        count = 0
        for shard in range(self._shards):
            for lease in self._query_index(
                "live_shard = :shard AND due_at <= :now",
                {":shard": string_attr(str(shard)), ":now": number_attr(epoch(now))},
                page_size=min(limit, 500),
            ):
                yield lease
                count += 1
                if count >= limit:
                    return

    # --- release claims ------------------------------------------------------------------------

    def claim_release(self, lease_id: str, owner: str | None, now: datetime) -> Claim:
        """Claim an `active` lease for a caller's release, checking the owner in the same write."""
        values, owner_ok = _owner_condition(owner)
        # An expired lease the sweep has not reached yet is already over for its caller (404, as
        # renew says); the sweep releases its worker and records it as `expired`.
        condition = f"#status = :active AND expires_epoch > :now AND {owner_ok}"
        try:
            return self._claim(lease_id, now, LeaseStatus.RELEASED, condition, values, fresh_outcome=True)
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id) or None
            if old is None:
                raise LeaseNotFound(f"lease {lease_id} not found") from lost
            status = old["status"]["S"]
            if status != LeaseStatus.ACTIVE:
                raise LeaseNotFound(f"lease {lease_id} is not active (status {status})") from lost
            if int(old["expires_epoch"]["N"]) <= epoch(now):
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
                {":pending": string_attr("pending"), ":releasing": string_attr("releasing")},
                fresh_outcome=False,
            )
        except self._errors.ConditionalCheckFailedException:
            return None

    def claim_failed(
        self, lease_id: str, now: datetime, *, status: LeaseStatus, token: str | None, reason: str | None = None
    ) -> Claim | None:
        """Claim a lease found broken (its worker gone or stopped, or `pending` past its deadline), recording why."""
        condition = "#status = :expected"
        values: dict[str, Any] = {":expected": string_attr(status.value)}
        if token is not None:
            condition += " AND provider_token = :token"
            values[":token"] = string_attr(token)
        try:
            return self._claim(lease_id, now, LeaseStatus.FAILED, condition, values, fresh_outcome=True, reason=reason)
        except self._errors.ConditionalCheckFailedException:
            return None

    def reclaim_ttl_deleted(self, old_image: Item, now: datetime) -> Claim | None:
        """Write a live lease that TTL deleted back as `releasing`, so its release is claimed and recorded."""
        claim_id = uuid.uuid4().hex
        item = dict(old_image)
        item.update(
            {
                "status": string_attr(LeaseStatus.RELEASING.value),
                "claim_id": string_attr(claim_id),
                "release_outcome": string_attr(LeaseStatus.EXPIRED.value),
                "live_shard": string_attr(self._shard_of(old_image["lease_id"]["S"])),
                "due_at": number_attr(epoch(now) + self._claim_seconds),
                "ttl": number_attr(epoch(now) + _CLAIM_TTL_SECONDS),
            }
        )
        try:
            self._call(
                "PutItem", TableName=self.table_name, Item=item, ConditionExpression="attribute_not_exists(lease_id)"
            )
        except self._errors.ConditionalCheckFailedException:
            return None
        return Claim(lease_from_item(item), claim_id, LeaseStatus.EXPIRED, counters.held_by(item))

    def finish_release(self, claim: Claim, now: datetime) -> Lease:
        """Record the claimed release as done (giving back its slots); only the claim's holder can."""
        ended = self._finish(
            claim.lease.lease_id,
            now,
            claim.outcome,
            "#status = :releasing AND claim_id = :claim",
            {":releasing": string_attr("releasing"), ":claim": string_attr(claim.claim_id)},
            claim.held_counters,
        )
        return ended or claim.lease.model_copy(
            update={"status": claim.outcome, "released_at": datetime.fromtimestamp(epoch(now), UTC)}
        )

    # --- counters ------------------------------------------------------------------------------

    def counter_values(self) -> dict[str, int]:
        """Every counter as stored (a small table: one item per provider and per owner)."""
        return {name: state.leases for name, state in self.counter_states().items()}

    def counter_states(self) -> dict[str, CounterState]:
        """Every counter with its version, read strongly consistently (a repair must see the latest)."""
        states: dict[str, CounterState] = {}
        request: dict[str, Any] = {"TableName": self._counters(), "ConsistentRead": True}
        while True:
            page = self._call("Scan", **request)
            for item in page.get("Items", []):
                states[item["counter"]["S"]] = CounterState.from_item(item)
            if "LastEvaluatedKey" not in page:
                return states
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def counters(self, names: Sequence[str]) -> dict[str, int]:
        """The named counters (BatchGetItem: the cost does not grow with the number of owners).

        DynamoDB may answer part of a batch and hand back the rest as UnprocessedKeys (throttling,
        the 16 MB limit); those are asked for again with backoff, never read as 0.
        """
        if not names:
            return {}
        table = self._counters()
        found: dict[str, int] = {}
        pending: dict[str, Any] = {
            table: {"Keys": [{"counter": string_attr(name)} for name in dict.fromkeys(names)], "ConsistentRead": True}
        }
        attempts = self._retry.attempts()
        while True:
            response = self._call("BatchGetItem", RequestItems=pending)
            for item in response.get("Responses", {}).get(table, []):
                found[item["counter"]["S"]] = int(item.get("leases", {}).get("N", "0"))
            pending = {name: keys for name, keys in (response.get("UnprocessedKeys") or {}).items() if keys.get("Keys")}
            if not pending:
                return {name: found.get(name, 0) for name in names}
            if not attempts.wait():
                raise StoreUnavailable("the lease store kept part of a batch read unprocessed; try again shortly")

    def live_holds(self) -> list[tuple[str, ...]]:
        """The counters each live lease holds (from the live index, held_counters only)."""
        holds: list[tuple[str, ...]] = []
        for shard in range(self._shards):
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": LIVE_INDEX,
                "KeyConditionExpression": "live_shard = :shard",
                "ProjectionExpression": "held_counters",
                "ExpressionAttributeValues": {":shard": string_attr(str(shard))},
            }
            while True:
                page = self._call("Query", **request)
                holds += [counters.held_by(item) for item in page.get("Items", [])]
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return holds

    def suspect_counter(self, counter: str, version: int, expected: int, now: datetime) -> bool:
        """Note on the counter that the live index disagrees with it at `version`; False if it changed since."""
        condition, names, values = counters.at_version(version)
        try:
            self._call(
                "UpdateItem",
                TableName=self._counters(),
                Key={"counter": string_attr(counter)},
                UpdateExpression="SET suspect_version = :seen, suspect_expected = :expected, suspect_at = :now",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    **values,
                    ":seen": number_attr(version),
                    ":expected": number_attr(expected),
                    ":now": number_attr(epoch(now)),
                },
            )
        except self._errors.ConditionalCheckFailedException:
            return False
        return True

    def repair_counter(self, counter: str, version: int, actual: int) -> bool:
        """Set a drifted counter to `actual` unless it changed since `version`; True if repaired."""
        condition, names, values = counters.at_version(version)
        try:
            self._call(
                "UpdateItem",
                TableName=self._counters(),
                Key={"counter": string_attr(counter)},
                UpdateExpression=(
                    "SET leases = :actual, #version = :next REMOVE suspect_version, suspect_expected, suspect_at"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={**names, "#version": "version"},
                ExpressionAttributeValues={**values, ":actual": number_attr(actual), ":next": number_attr(version + 1)},
            )
        except self._errors.ConditionalCheckFailedException:
            return False
        return True

    # --- renew ---------------------------------------------------------------------------------

    def renew(self, lease_id: str, owner: str | None, ttl_seconds: int | None, now: datetime) -> Lease:
        """Push `expires_at` (and the TTL) to now + ttl in one conditional write."""
        # Whole seconds, rounded up so a renewal is never shorter than asked.
        start = math.ceil(now.timestamp())
        values: dict[str, Any] = {
            ":now": number_attr(epoch(now)),
            ":start": number_attr(start),
            ":active": string_attr("active"),
        }
        owner_values, owner_ok = _owner_condition(owner)
        values.update(owner_values)
        if ttl_seconds is None:
            expires = ":start + ttl_seconds"
            sets = f"expires_epoch = {expires}, due_at = {expires}, #ttl = {expires}"
        else:
            del values[":start"]
            values[":ttl_seconds"] = number_attr(ttl_seconds)
            values[":expires"] = number_attr(start + ttl_seconds)
            sets = "expires_epoch = :expires, due_at = :expires, #ttl = :expires, ttl_seconds = :ttl_seconds"
        try:
            response = self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key={"lease_id": string_attr(lease_id)},
                UpdateExpression=f"SET {sets}",
                ConditionExpression=(f"#status = :active AND expires_epoch > :now AND {owner_ok}"),
                ExpressionAttributeNames={"#status": "status", "#ttl": "ttl"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id) or None
            if old is None:
                raise LeaseNotFound(f"lease {lease_id} not found") from lost
            status = old["status"]["S"]
            if status in (LeaseStatus.PENDING, LeaseStatus.RELEASING):
                raise LeaseConflict(f"lease {lease_id} is {status}; it cannot be renewed now") from lost
            if status != LeaseStatus.ACTIVE or int(old["expires_epoch"]["N"]) <= epoch(now):
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
        reason: str | None = None,
    ) -> Claim:
        claim_id = uuid.uuid4().hex
        outcome_expr = ":outcome" if fresh_outcome else "if_not_exists(release_outcome, :outcome)"
        reason_values = {":reason": string_attr(_reason_text(reason))} if reason else {}
        try:
            response = self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key={"lease_id": string_attr(lease_id)},
                UpdateExpression=(
                    f"SET #status = :releasing_new, claim_id = :claim, release_outcome = {outcome_expr},"
                    " due_at = :claim_due, #ttl = :claim_ttl" + (", failure_reason = :reason" if reason else "")
                ),
                ConditionExpression=f"attribute_exists(lease_id) AND {condition}",
                ExpressionAttributeNames={"#status": "status", "#ttl": "ttl"},
                ExpressionAttributeValues={
                    **values,
                    **({":now": number_attr(epoch(now))} if ":now" in condition else {}),
                    **({":active": string_attr("active")} if ":active" in condition else {}),
                    ":releasing_new": string_attr("releasing"),
                    ":claim": string_attr(claim_id),
                    ":outcome": string_attr(outcome.value),
                    ":claim_due": number_attr(epoch(now) + self._claim_seconds),
                    ":claim_ttl": number_attr(epoch(now) + _CLAIM_TTL_SECONDS),
                    **reason_values,
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            if old.get("claim_id", {}).get("S") != claim_id:
                raise
            response = {"Attributes": old}  # a retry of our own claim, which had landed
        item = response["Attributes"]
        return Claim(lease_from_item(item), claim_id, LeaseStatus(item["release_outcome"]["S"]), counters.held_by(item))

    def _finish(
        self,
        lease_id: str,
        now: datetime,
        final: LeaseStatus,
        condition: str,
        values: dict[str, Any],
        held: tuple[str, ...] = (),
        reason: str | None = None,
    ) -> Lease | None:
        """End a lease; with held counters the same transaction gives their slots back (then None)."""
        if reason:
            values = {**values, ":reason": string_attr(_reason_text(reason))}
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"lease_id": string_attr(lease_id)},
            "UpdateExpression": (
                "SET #status = :final, released_epoch = :now, #ttl = :retain"
                + (", failure_reason = :reason" if reason else "")
                + " REMOVE live_shard, due_at, claim_id, release_outcome, held_counters"
            ),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#status": "status", "#ttl": "ttl"},
            "ExpressionAttributeValues": {
                **values,
                ":final": string_attr(final.value),
                ":now": number_attr(epoch(now)),
                ":retain": number_attr(epoch(now) + self._retention),
            },
        }
        try:
            if held:
                self._transact(
                    [{"Update": update}, *(counters.give_back(self._counters(), counter) for counter in held)], []
                )
                return None
            response = self._call(
                "UpdateItem", **update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            landed = old.get("status", {}).get("S") == final.value and "live_shard" not in old
            if landed and abs(int(old.get("released_epoch", {}).get("N", "0")) - epoch(now)) <= 60:
                return lease_from_item(old)  # a retry of our own write, which had landed
            raise LeaseStateChanged(lease_id) from lost
        return lease_from_item(response["Attributes"])

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

    def _counters(self) -> str:
        if not self.counters_table:
            raise RuntimeError("lease limits are configured but COUNTERS_TABLE is not")
        return self.counters_table

    def _transact(self, items: list[dict[str, Any]], limits: Sequence[Limit], offset: int = 1) -> None:
        """One TransactWriteItems; a failed `take` of limits[i] (at items[offset + i]) raises LimitReached.

        A transaction cancelled only for contention (TransactionConflict, throttling) applied nothing
        and is tried again with backoff, under a new token: a token belongs to one attempt, so that
        botocore's own resend of a timed-out attempt is a no-op instead of a second try.
        """
        attempts = self._retry.attempts()
        while True:
            try:
                self._call("TransactWriteItems", TransactItems=items, ClientRequestToken=uuid.uuid4().hex)
                return
            except self._errors.TransactionCanceledException as cancelled:
                reasons = cancelled.response.get("CancellationReasons", [])
                for index, reason in enumerate(reasons):
                    if reason.get("Code") == "ConditionalCheckFailed":
                        if index >= offset and index - offset < len(limits):
                            raise LimitReached(limits[index - offset]) from cancelled
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
            if not isinstance(decoded, dict) or set(decoded) != {"s", "k"} or type(decoded["s"]) is not int:
                raise ValueError("not a token of this service")
            shard, key = decoded["s"], decoded["k"]
            if not 0 <= shard < self._shards or not (key is None or self._is_index_key(key, shard)):
                raise ValueError("not a key of this index")
            if key is not None:  # the canonical number text: DynamoDB compares keys by value
                key = {**key, "due_at": {"N": str(int(key["due_at"]["N"]))}}
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
            and is_lease_id(key["lease_id"].get("S"))
            and key["live_shard"] == {"S": str(shard)}
            and isinstance(key["due_at"], dict)
            and str(key["due_at"].get("N", "")).isdigit()
            and len(str(key["due_at"]["N"])) <= 12
        )

    def _call(self, operation: str, **request: Any) -> dict[str, Any]:
        """Run one DynamoDB operation, counting reads and turning outages into StoreUnavailable."""
        from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

        request.setdefault("ReturnConsumedCapacity", "TOTAL")
        method = getattr(self._client, _SNAKE[operation])
        attempts = self._retry.attempts()
        while True:
            try:
                response: dict[str, Any] = method(**request)
                break
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
        if operation in ("GetItem", "Query"):
            self.reads.requests += 1
            self.reads.items += response.get("Count", 1 if "Item" in response else 0)
            self.reads.capacity_units += float(response.get("ConsumedCapacity", {}).get("CapacityUnits", 0.0))
        self.reads.by_operation[operation] = self.reads.by_operation.get(operation, 0) + 1
        return response


def _reason_text(reason: str) -> str:
    """A failure reason as stored: bounded, so a provider's long error text cannot bloat the item."""
    return reason if len(reason) <= MAX_FAILURE_REASON_CHARS else reason[: MAX_FAILURE_REASON_CHARS - 1] + "…"


def _owner_condition(owner: str | None) -> tuple[dict[str, Any], str]:
    """The owner check: an owned lease needs its owner; without X-Lease-Owner only an unowned lease passes."""
    if owner is None:
        return {}, "attribute_not_exists(owner_id)"
    return {":owner": string_attr(owner)}, "(attribute_not_exists(owner_id) OR owner_id = :owner)"


_SNAKE = {
    "PutItem": "put_item",
    "GetItem": "get_item",
    "UpdateItem": "update_item",
    "Query": "query",
    "TransactWriteItems": "transact_write_items",
    "BatchGetItem": "batch_get_item",
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
