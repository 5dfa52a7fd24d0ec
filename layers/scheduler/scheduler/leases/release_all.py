"""Release every live lease of some owners (a caller restarting, its old workers to go), in bounded batches.

Which owners is the caller's to say (`callers.access.releasable_owners`: one named owner, or a service's own).
Each lease goes through the ordinary release (`release.release_owned`): claimed for its owner, its worker
removed, the release recorded once confirmed. One call releases at most `max_releases` leases and
starts no release with less than `reserve_seconds` left; the rest is for the next call, which
`next_token` continues. A released lease leaves the live listing, so a continuation that restarts a
page finds only what is still to do (a lease that could not be released may be reported again).
A lease already `releasing` (listed until its worker is confirmed gone) is reported, not attempted:
its claim's holder or the sweep removes its worker, so a continuation never waits on it twice.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING

from scheduler.callers.access import releasable_owners
from scheduler.errors import InvalidRequest, LeaseConflict, ProviderFailed, SchedulerError
from scheduler.leases.owned import live_page
from scheduler.leases.release import release_owned
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, ListFilter

if TYPE_CHECKING:
    from scheduler.leases.context import Context

MAX_RELEASES_PER_CALL = 25
PAGE_SIZE = 100
_BEING_RELEASED = (
    "releasing: its worker could not be removed yet (or is being removed now); the sweep retries until it is gone"
)
# A release removes a worker and confirms it gone: a few seconds on RunPod, well under one on Docker.
RESERVE_SECONDS = 8.0


class OwnerRelease:
    """What one call did: the leases it released, the ones it could not (and why), where to continue.

    A plain class: a dataclass would compile its methods at every cold start."""

    def __init__(self) -> None:
        self.released: list[Lease] = []
        self.not_released: list[tuple[Lease, SchedulerError]] = []
        self.next_token: str | None = None


def release_all(
    ctx: Context,
    owner: str | None,
    header: str | None,
    *,
    next_token: str | None = None,
    max_releases: int | None = None,
    reserve_seconds: float | None = None,
) -> OwnerRelease:
    """Release the live leases of `owner` (None: the caller's own owners), once the caller may (`header`: the
    X-Lease-Owner sent), from `next_token` on, as many as fit in this call (at most `max_releases`, default
    MAX_RELEASES_PER_CALL; none begun with less than `reserve_seconds` left)."""
    owners = releasable_owners(ctx.caller, owner, header)
    most = MAX_RELEASES_PER_CALL if max_releases is None else max_releases
    reserve = RESERVE_SECONDS if reserve_seconds is None else reserve_seconds
    outcome = OwnerRelease()
    attempts = 0
    seen: set[str] = set()
    page_token = decode_token(next_token)
    while True:
        page, following = live_page(ctx, ListFilter(limit=PAGE_SIZE, next_token=page_token), owners)
        for lease in page:
            if lease.lease_id in seen:
                continue  # a lease this call left releasing moved on in the index (its claim's due time)
            seen.add(lease.lease_id)
            if lease.status is not LeaseStatus.ACTIVE:
                # Reported, not attempted: no provider call, so it spends nothing of this call's budget (a
                # page of pending or releasing leases must not hold back the active ones behind it).
                _release_one(ctx, lease, outcome)
                continue
            if attempts and (attempts >= most or ctx.deadline.remaining() < reserve):
                # At least one lease per call, so a caller following the tokens always gets somewhere.
                outcome.next_token = encode_token(page_token)
                return outcome
            attempts += 1
            _release_one(ctx, lease, outcome)
        if following is None:
            return outcome
        page_token = following


def _release_one(ctx: Context, lease: Lease, outcome: OwnerRelease) -> None:
    if lease.status is LeaseStatus.PENDING:
        refusal = LeaseConflict("pending: its acquire is still running; release it once it is active")
        outcome.not_released.append((lease, refusal))
        return
    if lease.status is LeaseStatus.RELEASING:
        # Another release holds its claim (a DELETE, the sweep), or held it and could not remove the worker:
        # only the claim's holder, or the sweep once the claim is stale, may remove it — never two at once.
        outcome.not_released.append((lease, ProviderFailed(_BEING_RELEASED, details={"lease_id": lease.lease_id})))
        return
    try:
        # Listed as one of the owners the caller releases: claimed for the owner it was listed under.
        outcome.released.append(release_owned(ctx, lease.lease_id, lease.owner_id))
    except ProviderFailed as error:
        # Claimed, but the worker stays: the lease is `releasing` now, as a listing would show it.
        outcome.not_released.append((lease.replace(status=LeaseStatus.RELEASING), error))
    except SchedulerError as error:
        outcome.not_released.append((lease, error))


def encode_token(page_token: str | None) -> str:
    """The continuation of a bulk release: the listing page to start from (None: the first)."""
    raw = json.dumps({"page": page_token}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str | None) -> str | None:
    """The listing page a continuation names; InvalidRequest for one this service did not issue."""
    if not token:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not isinstance(decoded, dict) or set(decoded) != {"page"}:
            raise ValueError("not a continuation of this service")
        page = decoded["page"]
        if page is not None and not isinstance(page, str):
            raise ValueError("not a continuation of this service")
        return page
    except (ValueError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidRequest("next_token is not a token this service issued") from error
