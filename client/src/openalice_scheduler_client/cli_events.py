"""`leasectl events ID` (a lease's history), `leasectl webhooks add|list|remove`, and `leasectl watch --events`
(the events of the live leases as they happen)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from .cli_context import EXIT_OK, Context
from .client import SchedulerClient
from .errors import NotFound, SchedulerError, ServiceUnreachable
from .events import EVENT_TYPES, LeaseEvent, Webhook

ENDS = frozenset({"lease.released", "lease.expired", "lease.failed", "lease.preempted"})


def add_events_parsers(commands: Any) -> None:
    """The `events` and `webhooks` commands' arguments."""
    events = commands.add_parser(
        "events",
        help="a lease's lifecycle events, with who acted and why",
        description="The lease's events in order (GET /v1/lease/ID/events): its history and audit trail.",
    )
    events.add_argument("lease_id", metavar="ID")
    events.add_argument("--after", type=int, default=0, metavar="N", help="only the events numbered after N")
    hooks = commands.add_parser(
        "webhooks",
        help="add, list or remove the webhooks that receive an owner's lease events",
        description="Webhooks: each owner's lease events POSTed to a URL, signed as Standard Webhooks signs them.",
    )
    actions = hooks.add_subparsers(dest="webhooks_action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="send an owner's events to URL (prints the secret, once)")
    add.add_argument("target_url", metavar="URL")  # not `url`: that is the scheduler's (--url)
    add.add_argument(
        "--event",
        dest="event_types",
        action="append",
        choices=EVENT_TYPES,
        metavar="TYPE",
        help="repeatable; default every type",
    )
    add.add_argument("--owner", metavar="O", help="whose leases (required with the shared secret)")
    listing = actions.add_parser("list", help="the webhooks you may see")
    listing.add_argument("--owner", metavar="O", help="only this owner's")
    remove = actions.add_parser("remove", help="remove a webhook")
    remove.add_argument("webhook_id", metavar="ID")
    remove.add_argument("--owner", metavar="O", help="the webhook's owner (X-Lease-Owner, with the shared secret)")


def add_watch_events(watch: Any) -> None:
    """`watch --events`."""
    watch.add_argument(
        "--events",
        action="store_true",
        help="print the live leases' events as they happen (one line each; --json: one document each)",
    )


def event_line(event: LeaseEvent) -> str:
    reason = f"  ({event.reason})" if event.reason else ""
    return f"{event.timestamp}  {event.type:<24} {event.lease_id}  #{event.sequence:<3} by {event.actor}{reason}"


def _document(event: LeaseEvent) -> dict[str, Any]:
    return {"id": event.id, "type": event.type, "timestamp": event.timestamp, "data": event.data}


def cmd_events(ctx: Context, client: SchedulerClient) -> int:
    found = client.events(ctx.args.lease_id, after=ctx.args.after)
    if ctx.json:
        ctx.print_json({"events": [_document(event) for event in found], "next_after": None})
    elif not found:
        ctx.stdout.write("No events.\n")
    else:
        ctx.stdout.write("".join(event_line(event) + "\n" for event in found))
    return EXIT_OK


def _webhook_rows(hooks: Sequence[Webhook]) -> list[str]:
    rows = [("ID", "OWNER", "EVENTS", "URL")]
    for hook in hooks:
        kinds = (
            "all"
            if set(hook.events) == set(EVENT_TYPES)
            else ",".join(kind.removeprefix("lease.") for kind in hook.events)
        )
        rows.append((hook.id, hook.owner_id, kinds, hook.url))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    return [f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}" for row in rows]


def cmd_webhooks(ctx: Context, client: SchedulerClient) -> int:
    action = ctx.args.webhooks_action
    if action == "add":
        created = client.add_webhook(ctx.args.target_url, events=ctx.args.event_types, owner_id=ctx.args.owner)
        if ctx.json:
            ctx.print_json({"webhook": _wire(created.webhook), "secret": created.secret})
        else:
            ctx.stdout.write(
                f"webhook {created.webhook.id} for owner {created.webhook.owner_id}: {created.webhook.url}\n"
            )
            ctx.stdout.write(f"secret (shown once; verify deliveries with it): {created.secret}\n")
    elif action == "list":
        hooks = client.webhooks(owner_id=ctx.args.owner)
        if ctx.json:
            ctx.print_json({"webhooks": [_wire(hook) for hook in hooks]})
        else:
            ctx.stdout.write("\n".join(_webhook_rows(hooks)) + "\n" if hooks else "No webhooks.\n")
    else:
        client.remove_webhook(ctx.args.webhook_id, owner_id=ctx.args.owner)
        if ctx.json:
            ctx.print_json({})
    return EXIT_OK


def _wire(hook: Webhook) -> dict[str, Any]:
    return {**dataclasses.asdict(hook), "events": list(hook.events)}


class EventFollower:
    """The events of the live leases since it started: each poll lists the live leases and reads the history of
    each followed one after the last event seen (one request per lease and poll); a lease is followed until its
    end event has been shown, so the end of a lease that left the listing between two polls is shown too."""

    def __init__(self, client: SchedulerClient) -> None:
        self._client = client
        self._after: dict[str, int] | None = None  # lease → the last sequence shown

    def poll(self) -> list[LeaseEvent]:
        """The events that happened since the last poll (the first poll: none, it notes where each lease is)."""
        live = [lease.lease_id for lease in self._client.list()]
        if self._after is None:
            self._after = {lease_id: self._last(lease_id) for lease_id in live}
            return []
        for lease_id in live:
            self._after.setdefault(lease_id, 0)
        found: list[LeaseEvent] = []
        for lease_id, after in list(self._after.items()):
            try:
                events = self._client.events(lease_id, after=after)
            except NotFound:
                del self._after[lease_id]  # gone (past its retention), or not ours to read
                continue
            found += events
            if events:
                self._after[lease_id] = events[-1].sequence
            if any(event.type in ENDS for event in events):
                del self._after[lease_id]
        return sorted(found, key=lambda event: (event.timestamp, event.lease_id, event.sequence))

    def _last(self, lease_id: str) -> int:
        try:
            events = self._client.events(lease_id)
        except NotFound:
            return 0
        return events[-1].sequence if events else 0


def follow_events(ctx: Context, client: SchedulerClient, interval: float) -> int:
    """`watch --events`: print each event as it happens, until Ctrl-C."""
    follower = EventFollower(client)
    announced = False
    try:
        while True:
            started = time.monotonic()
            try:
                for event in follower.poll():
                    if ctx.json:
                        ctx.print_json(_document(event), compact=True)
                    else:
                        ctx.stdout.write(event_line(event) + "\n")
                        ctx.stdout.flush()
            except (ServiceUnreachable, SchedulerError) as failed:
                ctx.stderr.write(f"leasectl: {failed.code}: {failed.message} (retrying)\n")
            else:
                if not announced:  # from here on every event is shown (on stderr: stdout may be JSON lines)
                    ctx.stderr.write(
                        f"watching the live leases' events at {client.url} every {interval:g}s (Ctrl-C to quit)\n"
                    )
                    ctx.stderr.flush()
                    announced = True
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return EXIT_OK
