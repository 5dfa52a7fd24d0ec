"""A lease's worker output: checked against the lease's owner, read from its provider, bounded."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from scheduler.callers.access import LeaseAction
from scheduler.errors import LeaseConflict, ProviderFailed, WorkerLogsGone
from scheduler.leases.owned import readable_lease
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, format_time
from scheduler.providers.base import ProviderRequestFailed, ProviderUnreachable, WorkerGone
from scheduler.worker_logs import LogQuery, RenderedLogs, render

if TYPE_CHECKING:
    from scheduler.leases.context import Context


class WorkerOutput(NamedTuple):
    """What the route answers: the rendered lines and the lease they belong to."""

    lease: Lease
    logs: RenderedLogs


def worker_logs(
    ctx: Context, lease_id: str, header: str | None, query: LogQuery, *, timestamps: bool = False
) -> WorkerOutput:
    """The output of the worker of a lease the caller may read the logs of (`header`: the X-Lease-Owner sent);
    LeaseNotFound, OtherOwnersLease, NotLeaseOwner, WorkerLogsGone (its worker no longer exists), LeaseConflict
    (a pending lease whose worker is not made yet) or ProviderFailed."""
    lease, providers = readable_lease(ctx, LeaseAction.LOGS, lease_id, header), ctx.providers
    if lease.provider not in providers.names:
        if lease.status.is_live and lease.provider_token is not None:  # its worker may still run there
            raise ProviderFailed(
                f"lease {lease_id}'s worker runs on {lease.provider!r}, which PROVIDERS no longer names:"
                " its logs cannot be read until that provider is configured again",
                details={"lease_id": lease_id},
            )
        raise WorkerLogsGone(f"lease {lease_id} ran on {lease.provider!r}, which is no longer configured")
    try:
        lines = providers.get(lease.provider).logs(lease_id, lease.provider_token, query, ctx.deadline)
    except WorkerGone as gone:
        raise _gone(lease) from gone
    except (ProviderRequestFailed, ProviderUnreachable) as error:
        raise ProviderFailed(
            f"the worker's logs could not be read from {lease.provider}: {error}", details={"lease_id": lease_id}
        ) from error
    return WorkerOutput(lease, render(lines, timestamps=timestamps))


def _gone(lease: Lease) -> Exception:
    if lease.status is LeaseStatus.PENDING:
        return LeaseConflict(f"lease {lease.lease_id} is pending: its worker is not started yet")
    if lease.status.is_live:
        return WorkerLogsGone(f"the worker of lease {lease.lease_id} no longer exists on {lease.provider}")
    ended = f" at {format_time(lease.released_at)}" if lease.released_at else ""
    return WorkerLogsGone(
        f"lease {lease.lease_id} ended ({lease.status.value}){ended}; "
        f"{lease.provider} no longer holds its worker or its logs"
    )
