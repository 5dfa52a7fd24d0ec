"""Reading leases in memory, as `store/queries.py` reads them from DynamoDB's table and its two sparse indexes.

The live index (`live_shard`, sorted by `due_at`, then `lease_id`) and the starting index (`starting_shard`,
sorted by `created_epoch`) are the items that carry those attributes, so they hold exactly what DynamoDB's
would. The listing pages as a DynamoDB Query with a filter does: `limit` items of one shard are read, the
filter runs after, so a page may be short or empty while the listing goes on, and a next token comes back
whenever `limit` items were read. Its tokens are this store's own (a shard and a position in it); one it did
not issue is an InvalidRequest, as on DynamoDB.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal

from scheduler import lifecycle
from scheduler.errors import InvalidRequest, LeaseNotFound
from scheduler.models import Lease, ListFilter, is_lease_id
from scheduler.store import counters
from scheduler.store.conditions import Inputs
from scheduler.store.items import Item, epoch, lease_from_item
from scheduler.store.memory.rules import holds, listed, number, text
from scheduler.store.memory.tables import CounterTable, UsageTable
from scheduler.store.queries import shard_of

_FORMAT = "mem1."  # a token of this store, never of DynamoDB's
_MAX_DUE = 10**12  # the largest `due_at` a DynamoDB token may carry (12 digits)
Position = tuple[int, str]  # (due_at, lease_id): where a page of the live index ended


class MemoryReads:
    """The leases (items by id) and the counters and usage tables, behind one lock."""

    def __init__(self, *, shards: int = 1, counters_table: bool = True, usage_table: bool = True) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, Item] = {}
        self._shards = shards
        self._counter_table = CounterTable() if counters_table else None
        self._usage_table = UsageTable() if usage_table else None

    def get(self, lease_id: str) -> Lease:
        """The lease, live or ended (an ended one until TTL deletes it); LeaseNotFound otherwise."""
        with self._lock:
            item = self._items.get(lease_id)
        if item is None:
            raise LeaseNotFound(f"lease {lease_id} not found")
        return lease_from_item(item)

    def held_counters(self, lease_id: str) -> tuple[str, ...]:
        with self._lock:
            return counters.held_by(self._items.get(lease_id, {}))

    def list_live(
        self, query: ListFilter, now: datetime, owners: tuple[str, ...] | None = None
    ) -> tuple[list[Lease], str | None]:
        """One page of listed leases: `query.limit` items of the live index read, then filtered (`owners`: only
        theirs; `()`: none)."""
        shard, after = self._decode_token(query.next_token)
        if owners == ():
            return [], None
        with self._lock:
            read = [item for item in self._live(shard) if after is None or _position(item) > after][: query.limit]
        wanted = {name: getattr(query, name) for name in ("owner_id", "kind", "provider")}
        leases = [
            lease_from_item(item)
            for item in read
            if listed(item, epoch(now))
            and all(value is None or text(item, name) == str(value) for name, value in wanted.items())
            and (owners is None or text(item, "owner_id") in owners)
        ]
        if read and len(read) >= query.limit:
            return leases, self._encode_token(shard, _position(read[-1]))
        if shard + 1 < self._shards:
            return leases, self._encode_token(shard + 1, None)
        return leases, None

    def live_leases(self) -> Iterator[Lease]:
        """Every live lease (pending, active, releasing), shard by shard."""
        with self._lock:
            found = [item for shard in range(self._shards) for item in self._live(shard)]
        for item in found:
            yield lease_from_item(item)

    def starting_leases(self) -> Iterator[Lease]:
        """Active leases whose worker is still starting: the starting index, filtered as the DynamoDB store
        filters it (the condition of `claim_boot_failed` without its token)."""
        with self._lock:
            chosen = [
                item
                for shard in range(self._shards)
                for item in sorted(
                    (item for item in self._items.values() if text(item, "starting_shard") == str(shard)),
                    key=lambda item: (number(item, "created_epoch") or 0, item["lease_id"]["S"]),
                )
                if holds(lifecycle.CLAIM_BOOT_FAILED, Inputs(), item)
            ]
        for item in chosen:
            yield lease_from_item(item)

    def due_leases(self, now: datetime, limit: int = 500) -> Iterator[Lease]:
        """Live leases whose `due_at` has passed (expired ones, stale release claims), at most `limit`."""
        with self._lock:
            live = [item for shard in range(self._shards) for item in self._live(shard)]
            due = [item for item in live if _position(item)[0] <= epoch(now)]
        for item in due[:limit]:
            yield lease_from_item(item)

    def expiring_leases(self, now: datetime, until: datetime) -> Iterator[Lease]:
        """Active leases expiring after `now` and by `until` that no warning was written for."""
        inputs = Inputs(now=epoch(now))
        with self._lock:
            live = [item for shard in range(self._shards) for item in self._live(shard)]
            found = [
                item
                for item in live
                if epoch(now) < _position(item)[0] <= epoch(until)
                and holds(lifecycle.WARN_EXPIRY, inputs._replace(seen_expiry=_expiry(item)), item)
            ]
        for item in found:
            yield lease_from_item(item)

    def live_holds(self) -> list[tuple[str, ...]]:
        with self._lock:
            return [counters.held_by(item) for shard in range(self._shards) for item in self._live(shard)]

    def _live(self, shard: int) -> list[Item]:
        """One shard of the live index, in its order."""
        return sorted((item for item in self._items.values() if text(item, "live_shard") == str(shard)), key=_position)

    def _shard_of(self, lease_id: str) -> str:
        return shard_of(lease_id, self._shards)

    def _encode_token(self, shard: int, after: Position | None) -> str:
        raw = json.dumps([shard, *(after or ())], separators=(",", ":")).encode()
        return _FORMAT + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _decode_token(self, token: str | None) -> tuple[int, Position | None]:
        if not token:
            return 0, None
        try:
            if not token.startswith(_FORMAT):
                raise ValueError("not a token of this store")
            body = token.removeprefix(_FORMAT)
            decoded = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            if not isinstance(decoded, list) or len(decoded) not in (1, 3) or type(decoded[0]) is not int:
                raise ValueError("not a token of this store")
            shard, after = decoded[0], decoded[1:]
            if not 0 <= shard < self._shards:
                raise ValueError("no such shard")
            if not after:
                return shard, None
            due, lease_id = after
            if type(due) is not int or not 0 <= due < _MAX_DUE or not is_lease_id(lease_id):
                raise ValueError("not a position in the live index")
            return shard, (due, lease_id)
        except (ValueError, TypeError, UnicodeDecodeError, binascii.Error) as error:
            raise InvalidRequest("next_token is not a token this service issued") from error


def _expiry(item: Item) -> int | None:
    expires = number(item, "expires_epoch")
    return None if expires is None else int(expires)


def _position(item: Item) -> Position:
    return int(number(item, "due_at") or Decimal(0)), item["lease_id"]["S"]
