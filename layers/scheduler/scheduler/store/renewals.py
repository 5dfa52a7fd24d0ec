"""Renewing a lease: its expiry pushed to now + ttl in one conditional write (with the owner's daily budget, one
transaction that also reserves the extension's spend), never past the end its worker has of its own."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING

from scheduler import budgets, lifecycle
from scheduler.lifecycle import Refusal
from scheduler.models import Lease
from scheduler.store import counters
from scheduler.store.conditions import Inputs, render
from scheduler.store.counters import Limit
from scheduler.store.items import Item, epoch, lease_from_item, seen
from scheduler.store.queries import LeaseReads
from scheduler.store.refusals import refusal_error

if TYPE_CHECKING:
    from scheduler.budgets import OwnerBudgets


class LeaseRenewals(LeaseReads):
    """The renew transition (`lifecycle.RENEW`)."""

    def renew(
        self,
        lease_id: str,
        owner: str | None,
        ttl_seconds: int | None,
        now: datetime,
        seen_expiry: int | None = None,
        *,
        by: str | None = None,
    ) -> Lease:
        """Push `expires_at` (and the TTL) to now + ttl in one conditional write (whole seconds, rounded
        up, so a renewal is never shorter than asked), never past the end the lease's worker has of its own
        (`worker_ends_epoch`: 409), recording `by` whom (renewed_by). Without a ttl such a lease's write cannot
        hold its new expiry against that end (see `Guard.WORKER_LIFE`) and loses: it is written again, once, with
        the lease's own ttl as read."""
        start = math.ceil(now.timestamp())
        inputs = Inputs(
            now=epoch(now), start=start, owner=owner, ttl_seconds=ttl_seconds, seen_expiry=seen_expiry, by=by
        )
        try:
            response = self._call("UpdateItem", **self._update(lease_id, render(lifecycle.RENEW, inputs).request()))
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            if ttl_seconds is None and seen_expiry is None and ("worker_ends_epoch" in old or "preempt_epoch" in old):
                ttl_seconds = int(old["ttl_seconds"]["N"])  # the lease's own, as read: a value to hold
                found = seen(old)
                if lifecycle.refusal(lifecycle.RENEW, found, epoch(now), owner, start + ttl_seconds) is Refusal.CHANGED:
                    expiry = int(old["expires_epoch"]["N"])
                    return self.renew(lease_id, owner, ttl_seconds, now, seen_expiry=expiry, by=by)
            new_expiry = None if ttl_seconds is None else start + ttl_seconds
            raise refusal_error(lifecycle.RENEW, lease_id, old, epoch(now), owner, new_expiry) from lost
        return lease_from_item(response["Attributes"])

    def renew_reserving(
        self,
        lease_id: str,
        owner: str | None,
        ttl_seconds: int | None,
        now: datetime,
        budget: OwnerBudgets,
        *,
        by: str | None = None,
    ) -> Lease | Limit:
        """Renew, reserving the extension's spend on the owner's daily budget in the same transaction; the
        budget's limit comes back when it would not take it (nothing written).

        The lease is read first; the write holds only if it still expires when it was read, so the
        reservation matches the extension exactly (a concurrent renew makes this one a 409, never a
        double reservation). A lease without a price renews as always; one without an owner reserves on the
        shared owner's day. The release lag reserved at acquire moves with the expiry: each day the lease
        may now end on, the renewal's and any later one up to the new end of the lag, takes what the
        lease's reservation on it grows by (`OwnerBudgets.renewal`), and days already over give theirs back.
        """
        item = self._read_item(lease_id)
        if budget.per_day is None or "cost_per_hour" not in item:
            return self.renew(lease_id, owner, ttl_seconds, now, by=by)
        lease_owner = budgets.budget_owner(item.get("owner_id", {}).get("S"))
        start = math.ceil(now.timestamp())
        old_expiry = int(item["expires_epoch"]["N"])
        # The ttl as read (the lease's own when none is given): the write holds only on the expiry read, so it
        # is the one the renewal takes, and the worker's own end can be held against a value.
        ttl = ttl_seconds if ttl_seconds is not None else int(item["ttl_seconds"]["N"])
        new_expiry = start + ttl
        if passes_an_end(item, new_expiry):
            raise refusal_error(lifecycle.RENEW, lease_id, item, epoch(now), owner, new_expiry)
        if new_expiry <= old_expiry:
            return self.renew(lease_id, owner, ttl_seconds, now, by=by)
        rate, created = float(item["cost_per_hour"]["N"]), int(float(item["created_epoch"]["N"]))
        renewing = budget.renewal(counters.held_by(item), lease_owner, rate, created, new_expiry, epoch(now))
        inputs = Inputs(
            now=epoch(now),
            start=start,
            owner=owner,
            ttl_seconds=ttl,
            seen_expiry=old_expiry,
            reweighed=renewing.held,
            by=by,
        )
        update = {"Update": {**self._key(lease_id), **render(lifecycle.RENEW, inputs).request()}}
        try:
            full = self._transact([update, *(counters.take(self._counters(), limit) for limit in renewing.limits)])
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            raise refusal_error(lifecycle.RENEW, lease_id, old, epoch(now), owner, new_expiry) from lost
        return renewing.limits[full] if full is not None else self.get(lease_id)


def passes_an_end(item: Item, new_expiry: int) -> bool:
    """Whether `new_expiry` passes the worker's own end or the lease's preemption notice (the renewal is refused)."""
    return any(name in item and new_expiry > int(item[name]["N"]) for name in ("worker_ends_epoch", "preempt_epoch"))
