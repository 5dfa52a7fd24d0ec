"""`leasectl watch`: the live leases and their remaining time, redrawn in place until Ctrl-C
(`--once`: one frame; `--json`: one list body per line per refresh); `--events`: their lifecycle events as they
happen, one line each (`cli_events.py`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .cli_context import EXIT_OK, PROG, Context, positive_float
from .cli_events import add_watch_events, follow_events
from .cli_leases import list_body
from .cli_style import CLEAR_EOL, Paint, format_notices, format_table, isatty, no_paint, painter
from .client import SchedulerClient
from .errors import SchedulerError, ServiceUnreachable
from .models import Lease

CLEAR_SCREEN, HOME, CLEAR_BELOW = "\x1b[2J", "\x1b[H", "\x1b[J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def add_watch_parser(commands: Any) -> None:
    """The `watch` command's arguments."""
    watch = commands.add_parser(
        "watch",
        help="live view of the leases",
        description="Redraw the live leases and their remaining time in place until Ctrl-C.",
    )
    watch.add_argument("--interval", type=positive_float, default=1.0, metavar="SECONDS", help="refresh period")
    watch.add_argument("--once", action="store_true", help="draw one frame and exit (no screen control codes)")
    add_watch_events(watch)


def watch_frame(
    url: str, leases: Sequence[Lease] | None, error: str | None, interval: float, paint: Paint = no_paint
) -> list[str]:
    """The lines of one `watch` frame: a title, the table (or a note), and the last error if any."""
    now = datetime.now(UTC)
    count = "?" if leases is None else str(len(leases))
    title = f"{PROG} watch  {url}  {count} live  {now:%H:%M:%S} UTC  (every {interval:g}s, Ctrl-C to quit)"
    lines = [title, ""]
    if leases:
        lines += format_table(leases, now, paint) + format_notices(leases, now, paint)
    elif leases is not None:
        lines.append("No live leases.")
    if error:
        lines += ["", f"! {error}"]
    return lines


def cmd_watch(ctx: Context, client: SchedulerClient) -> int:
    interval: float = ctx.args.interval
    if ctx.args.events:
        return follow_events(ctx, client, interval)
    if ctx.args.once:
        snapshot = client.list()
        if ctx.json:
            ctx.print_json(list_body(snapshot), compact=True)
        else:
            ctx.stdout.write("\n".join(watch_frame(client.url, snapshot, None, interval)) + "\n")
        return EXIT_OK
    ansi = isatty(ctx.stdout) and not ctx.json
    out = ctx.stdout
    if ansi:
        out.write(HIDE_CURSOR + CLEAR_SCREEN)
    leases: list[Lease] | None = None
    try:
        while True:
            error: str | None = None
            fetched_at = time.monotonic()
            try:
                leases = client.list()
            except ServiceUnreachable as unreachable:
                error = f"service unreachable: {unreachable.message} (retrying)"
            except SchedulerError as failed:
                error = f"{failed.code}: {failed.message} (retrying)"
            if ctx.json:
                if error is None and leases is not None:
                    ctx.print_json(list_body(leases), compact=True)
                else:
                    ctx.stderr.write(f"{PROG}: {error}\n")
            else:
                frame = watch_frame(client.url, leases, error, interval, painter(out) if ansi else no_paint)
                if ansi:
                    out.write(HOME + "".join(line + CLEAR_EOL + "\n" for line in frame) + CLEAR_BELOW)
                else:
                    out.write("\n".join(frame) + "\n\n")
                out.flush()
            time.sleep(max(0.0, interval - (time.monotonic() - fetched_at)))
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        if ansi:
            out.write(SHOW_CURSOR)
            out.flush()
