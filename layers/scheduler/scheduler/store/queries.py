"""Reading leases: one by id, a page of live ones (with this service's paging tokens), the sweep index.

`live_shard` + `due_at` exist only while a lease is live and form the sparse GSI `live-by-due`,
which the sweep queries for `due_at <= now` and the list reads shard by shard (filtered).
`starting_shard` + `created_epoch` form `starting-by-created`, as sparse: only while the lease's worker
is starting (removed when it is ready and when the lease ends), for the sweep's readiness pass.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from scheduler import lifecycle
from scheduler.errors import InvalidRequest, LeaseNotFound
from scheduler.models import Lease, ListFilter, is_lease_id
from scheduler.store import conditions, counters
from scheduler.store.client import TableClient
from scheduler.store.conditions import Inputs, condition
from scheduler.store.items import Item, epoch, lease_from_item, number_attr, string_attr

LIVE_INDEX = "live-by-due"
STARTING_INDEX = "starting-by-created"


def shard_of(lease_id: str, shards: int) -> str:
    """The live index's partition a lease sits in (of `shards`)."""
    return str(uuid.UUID(lease_id).int % shards) if shards > 1 else "0"


class LeaseReads(TableClient):
    """Lease reads; `shards` spreads the live index over that many partition keys."""

    def __init__(self, table_name: str, client: Any, *, shards: int = 1, **options: Any) -> None:
        super().__init__(table_name, client, **options)
        self._shards = shards

    def get(self, lease_id: str) -> Lease:
        """The lease, live or ended within the retention period; LeaseNotFound otherwise."""
        response = self._call(
            "GetItem", TableName=self.table_name, Key={"lease_id": string_attr(lease_id)}, ConsistentRead=True
        )
        if "Item" not in response:
            raise LeaseNotFound(f"lease {lease_id} not found")
        return lease_from_item(response["Item"])

    def held_counters(self, lease_id: str) -> tuple[str, ...]:
        """The counters a lease holds now (strongly consistent; empty for an unknown lease)."""
        response = self._call(
            "GetItem",
            TableName=self.table_name,
            Key={"lease_id": string_attr(lease_id)},
            ConsistentRead=True,
            ProjectionExpression="held_counters",
        )
        return counters.held_by(response.get("Item", {}))

    def list_live(
        self, query: ListFilter, now: datetime, owners: tuple[str, ...] | None = None
    ) -> tuple[list[Lease], str | None]:
        """One page of listed leases (one Query); `next_token` continues it; `owners`: only theirs (`()`: none).

        Pending and active leases until their expiry, releasing ones until they end (`lifecycle.LISTED_*`).
        As DynamoDB pages, a page may be short or even empty while `next_token` is set (the filter
        runs after `Limit` items were read); only a None token means the listing is done. The owners are one
        more term of the filter: a page reads, and costs, what it would for every owner.
        """
        shard, start_key = self._decode_token(query.next_token)
        if owners == ():
            return [], None
        listed = conditions.listed(epoch(now))
        names = dict(listed.names)
        values: dict[str, Any] = {":shard": string_attr(str(shard)), **listed.values}
        # The whole shard, not only `due_at > now`: a releasing lease whose claim went stale (its
        # worker could not be removed yet) is due, and still listed. What is due besides is the
        # sweep's backlog (expired leases it has not claimed yet), which the filter leaves out.
        filters = [listed.condition]
        for name in ("owner_id", "kind", "provider"):
            value = getattr(query, name)
            if value is not None:
                names[f"#{name}"] = name
                values[f":{name}"] = string_attr(str(value))
                filters.append(f"#{name} = :{name}")
        if owners is not None:
            names["#owner_id"] = "owner_id"
            for index, owner in enumerate(owners):
                values[f":owner{index}"] = string_attr(owner)
            filters.append(f"#owner_id IN ({', '.join(f':owner{index}' for index in range(len(owners)))})")
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": LIVE_INDEX,
            "KeyConditionExpression": "live_shard = :shard",
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
            for item in self._index_items("live_shard = :shard", {":shard": string_attr(str(shard))}, page_size=500):
                yield lease_from_item(item)

    def starting_leases(self) -> Iterator[Lease]:
        """Active leases whose worker is still starting, for the sweep: the sparse starting index, which
        holds only those (and pending ones, which the filter leaves out)."""
        starting = condition(lifecycle.CLAIM_BOOT_FAILED, Inputs())
        for shard in range(self._shards):
            request_values = {":shard": string_attr(str(shard)), **starting.values}
            for item in self._index_items(
                "starting_shard = :shard",
                request_values,
                page_size=500,
                filter_=starting.condition,
                names=starting.names,
                index=STARTING_INDEX,
            ):
                yield lease_from_item(item)

    def due_leases(self, now: datetime, limit: int = 500) -> Iterator[Lease]:
        """Live leases whose `due_at` has passed: expired ones and stale release claims."""
        count = 0
        for shard in range(self._shards):
            for item in self._index_items(
                "live_shard = :shard AND due_at <= :now",
                {":shard": string_attr(str(shard)), ":now": number_attr(epoch(now))},
                page_size=min(limit, 500),
            ):
                yield lease_from_item(item)
                count += 1
                if count >= limit:
                    return

    def expiring_leases(self, now: datetime, until: datetime) -> Iterator[Lease]:
        """Active leases expiring after `now` and by `until` that no warning was written for (their current
        expiry): the live index's range `now < due_at <= until` (an active lease is due at its expiry), filtered."""
        warnable = conditions.warnable(epoch(now))
        window = {":after": number_attr(epoch(now) + 1), ":until": number_attr(epoch(until)), **warnable.values}
        for shard in range(self._shards):
            for item in self._index_items(
                "live_shard = :shard AND due_at BETWEEN :after AND :until",
                {":shard": string_attr(str(shard)), **window},
                page_size=500,
                filter_=warnable.condition,
                names=warnable.names,
            ):
                yield lease_from_item(item)

    def live_holds(self) -> list[tuple[str, ...]]:
        """The counters each live lease holds (from the live index, held_counters only)."""
        return [
            counters.held_by(item)
            for shard in range(self._shards)
            for item in self._index_items(
                "live_shard = :shard", {":shard": string_attr(str(shard))}, projection="held_counters"
            )
        ]

    def _index_items(
        self,
        key_condition: str,
        values: dict[str, Any],
        page_size: int | None = None,
        projection: str | None = None,
        filter_: str | None = None,
        names: dict[str, str] | None = None,
        index: str = LIVE_INDEX,
    ) -> Iterator[Item]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": index,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": values,
        }
        if filter_ is not None:
            request["FilterExpression"] = filter_
        if names:
            request["ExpressionAttributeNames"] = names
        if page_size is not None:
            request["Limit"] = page_size
        if projection is not None:
            request["ProjectionExpression"] = projection
        for page in self._pages("Query", request):
            yield from page.get("Items", [])

    def _shard_of(self, lease_id: str) -> str:
        return shard_of(lease_id, self._shards)

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
