"""The callers registry (table CALLERS_TABLE, key `pk`): who may call, by name, by token hash and by principal.

Three kinds of item, so that each lookup an authorization makes is one strongly consistent GetItem:
- `caller#<name>`: the caller (role, owners, principal_arn, created_at/by), its tokens' hashes in the map
  `tokens` (hash → the epoch its grace ends, 0 while current), and `rev`, counted up by every rotation;
- `token#<sha256>`: one token, with a copy of its caller's name, role and owners (no route changes those, so
  the copy never goes stale), and `expires_epoch` once a rotation gave it a grace period (`ttl` removes it
  later; a read checks the epoch itself, as TTL deletes within days);
- `principal#<role or user ARN>`: the caller an IAM principal is (iam mode), with the same copy.

No transactions (dynalite, the second DynamoDB the tests run on, has none): each change is a sequence of
conditional writes ordered so that a crash leaves nothing that works which should not. A revocation deletes
the caller item last and only if no rotation slipped in since it read it (`rev`), so every token it ever had
is gone once it answers.
"""

from __future__ import annotations

import contextlib
from typing import Any

from scheduler.callers.model import Caller, CallerRecord, Role, principal_key
from scheduler.errors import Conflict, NotFound
from scheduler.store.client import TableClient
from scheduler.store.items import Item, number_attr, string_attr
from scheduler.store.retries import Backoff

# A rotated-out token's item stays a day past its grace before TTL may delete it (reads check the epoch).
_TOKEN_TTL_SLACK_SECONDS = 24 * 3600
_REVOKE_ATTEMPTS = 5


def _key(kind: str, value: str) -> dict[str, Any]:
    return {"pk": string_attr(f"{kind}#{value}")}


def _owners(item: Item) -> tuple[str, ...]:
    return tuple(entry["S"] for entry in item.get("owners", {}).get("L", []))


def _copy(caller: Caller) -> Item:
    """What a token or principal item holds of its caller."""
    return {
        "caller": string_attr(caller.name),
        "role": string_attr(caller.role.value),
        "owners": {"L": [string_attr(owner) for owner in caller.owners]},
    }


def _caller_of(item: Item) -> Caller:
    return Caller(item["caller"]["S"], Role(item["role"]["S"]), _owners(item))


def record_of(item: Item) -> CallerRecord:
    """A caller item as the registry shows it."""
    principal = item.get("principal_arn", {}).get("S")
    return CallerRecord(
        name=item["name"]["S"],
        role=Role(item["role"]["S"]),
        owners=_owners(item),
        created_at=int(item["created_epoch"]["N"]),
        created_by=item["created_by"]["S"],
        principal_arn=principal,
    )


class CallerStore(TableClient):
    """The registry on its DynamoDB table."""

    def __init__(self, table_name: str, client: Any, *, retry: Backoff | None = None) -> None:
        super().__init__(table_name, client, retry=retry)

    # --- what an authorization reads: one GetItem ---------------------------------------------------

    def by_token(self, token_hash: str, now_epoch: int) -> Caller | None:
        """The caller a token (by its hash) stands for, while it is current or in its grace; else None."""
        item = self._get(_key("token", token_hash))
        expires = item.get("expires_epoch", {}).get("N")
        if not item or (expires is not None and int(expires) <= now_epoch):
            return None
        return _caller_of(item)

    def by_principal(self, arn: str) -> Caller | None:
        """The caller an IAM principal (a user, a role, or a session of one) is; else None."""
        item = self._get(_key("principal", principal_key(arn)))
        return _caller_of(item) if item else None

    # --- what operators do --------------------------------------------------------------------------

    def get(self, name: str) -> CallerRecord:
        """One caller; NotFound when there is none of that name."""
        item = self._get(_key("caller", name))
        if not item:
            raise NotFound(f"caller {name} not found")
        return record_of(item)

    def list(self) -> list[CallerRecord]:
        """Every caller, by name (a Scan: a registry holds tens of callers, not millions)."""
        request = {
            "TableName": self.table_name,
            "FilterExpression": "#kind = :caller",
            "ExpressionAttributeNames": {"#kind": "kind"},
            "ExpressionAttributeValues": {":caller": string_attr("caller")},
            "ConsistentRead": True,
        }
        items = [item for page in self._pages("Scan", request) for item in page.get("Items", [])]
        return sorted((record_of(item) for item in items), key=lambda record: record.name)

    def create(self, record: CallerRecord, token_hash: str | None) -> None:
        """Add a caller (with its first token, when given); Conflict when the name or the principal is taken."""
        caller = record.caller
        principal = principal_key(record.principal_arn) if record.principal_arn else None
        if principal is not None and not self._put_new(_key("principal", principal), {**_copy(caller)}):
            raise Conflict(f"principal_arn {record.principal_arn} is already another caller's")
        item: Item = {
            "kind": string_attr("caller"),
            "name": string_attr(record.name),
            "role": string_attr(record.role.value),
            "owners": {"L": [string_attr(owner) for owner in record.owners]},
            "created_epoch": number_attr(record.created_at),
            "created_by": string_attr(record.created_by),
            "tokens": {"M": {token_hash: number_attr(0)} if token_hash else {}},
            "rev": number_attr(0),
        }
        if record.principal_arn:
            item["principal_arn"] = string_attr(record.principal_arn)
        if not self._put_new(_key("caller", record.name), item):
            if principal is not None:
                self._delete_mapping(principal, record.name)
            raise Conflict(f"a caller named {record.name} exists")
        if token_hash:
            self._put_new(_key("token", token_hash), {"kind": string_attr("token"), **_copy(caller)})

    def rotate(self, name: str, token_hash: str, grace_seconds: int, now_epoch: int) -> None:
        """Give the caller a new token; its others keep working `grace_seconds` more (0: they stop now)."""
        item = self._get(_key("caller", name))
        if not item:
            raise NotFound(f"caller {name} not found")
        self._put_new(_key("token", token_hash), {"kind": string_attr("token"), **_copy(record_of(item).caller)})
        ends = now_epoch + grace_seconds
        kept: dict[str, int] = {}
        for old, value in item.get("tokens", {}).get("M", {}).items():
            current = int(value["N"])
            if grace_seconds > 0 and (current == 0 or current > now_epoch):
                kept[old] = min(current, ends) if current else ends
        dropped = [old for old in item.get("tokens", {}).get("M", {}) if old not in kept]
        names = {"#rev": "rev", "#tokens": "tokens", "#new": token_hash}
        names |= {f"#k{i}": old for i, old in enumerate(kept)} | {f"#d{i}": old for i, old in enumerate(dropped)}
        # Each token is its own map entry: two rotations at once each add theirs, and neither loses the other's.
        update = "ADD #rev :one SET #tokens.#new = :zero"
        update += "".join(f", #tokens.#k{i} = :k{i}" for i in range(len(kept)))
        if dropped:
            update += " REMOVE " + ", ".join(f"#tokens.#d{i}" for i in range(len(dropped)))
        values = {":one": number_attr(1), ":zero": number_attr(0)}
        values |= {f":k{i}": number_attr(epoch) for i, epoch in enumerate(kept.values())}
        try:
            self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key=_key("caller", name),
                UpdateExpression=update,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except self._errors.ConditionalCheckFailedException:
            self._delete(_key("token", token_hash))  # revoked meanwhile: the new token must not outlive it
            raise NotFound(f"caller {name} not found") from None
        for old in dropped:
            self._delete(_key("token", old))
        for old, epoch in kept.items():
            self._expire(old, epoch)

    def revoke(self, name: str) -> CallerRecord:
        """Remove the caller, every token it has and its principal; NotFound when there is none of that name."""
        for _ in range(_REVOKE_ATTEMPTS):
            item = self._get(_key("caller", name))
            if not item:
                raise NotFound(f"caller {name} not found")
            for token in item.get("tokens", {}).get("M", {}):
                self._delete(_key("token", token))
            record = record_of(item)
            if record.principal_arn:
                self._delete_mapping(principal_key(record.principal_arn), name)
            try:
                self._call(
                    "DeleteItem",
                    TableName=self.table_name,
                    Key=_key("caller", name),
                    ConditionExpression="#rev = :rev",
                    ExpressionAttributeNames={"#rev": "rev"},
                    ExpressionAttributeValues={":rev": item["rev"]},
                )
                return record
            except self._errors.ConditionalCheckFailedException:
                continue  # a rotation added a token since the read: delete that one too
        raise Conflict(f"caller {name} is being rotated as fast as it is revoked; try again")

    # --- the writes -----------------------------------------------------------------------------------

    def _get(self, key: dict[str, Any]) -> Item:
        response = self._call("GetItem", TableName=self.table_name, Key=key, ConsistentRead=True)
        item: Item = response.get("Item", {})
        return item

    def _put_new(self, key: dict[str, Any], item: Item) -> bool:
        """Write an item that must not exist yet; False when it does."""
        try:
            self._call(
                "PutItem",
                TableName=self.table_name,
                Item={**key, **item},
                ConditionExpression="attribute_not_exists(pk)",
            )
            return True
        except self._errors.ConditionalCheckFailedException:
            return False

    def _delete(self, key: dict[str, Any]) -> None:
        self._call("DeleteItem", TableName=self.table_name, Key=key)

    def _delete_mapping(self, principal: str, name: str) -> None:
        """Remove a principal's mapping if it is `name`'s (never another caller's)."""
        with contextlib.suppress(self._errors.ConditionalCheckFailedException):
            self._call(
                "DeleteItem",
                TableName=self.table_name,
                Key=_key("principal", principal),
                ConditionExpression="#caller = :name",
                ExpressionAttributeNames={"#caller": "caller"},
                ExpressionAttributeValues={":name": string_attr(name)},
            )

    def _expire(self, token: str, epoch: int) -> None:
        """End a token's life at `epoch` (or sooner, if it was to end sooner already)."""
        # Gone already, or ending sooner: left as it is.
        with contextlib.suppress(self._errors.ConditionalCheckFailedException):
            self._call(
                "UpdateItem",
                TableName=self.table_name,
                Key=_key("token", token),
                UpdateExpression="SET #expires = :end, #ttl = :ttl",
                ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(#expires) OR #expires > :end)",
                ExpressionAttributeNames={"#expires": "expires_epoch", "#ttl": "ttl"},
                ExpressionAttributeValues={
                    ":end": number_attr(epoch),
                    ":ttl": number_attr(epoch + _TOKEN_TTL_SLACK_SECONDS),
                },
            )
