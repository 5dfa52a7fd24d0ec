"""`leasectl callers add|list|rotate|remove`: the callers registry (operators only; AUTH_MODE `token` or `iam`).

A token is printed once, by `add` (AUTH_MODE=token) and `rotate`, with a warning on stderr that it will not be shown
again; `--json` prints the API's body (the token in it) and the same warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .callers import DEFAULT_GRACE_SECONDS
from .cli_context import EXIT_OK, PROG, Context, duration, format_duration
from .cli_style import ExampleFormatter, example_epilog
from .client import SchedulerClient
from .models import ROLES, Caller

MAX_GRACE_SECONDS = 604800  # RotateRequest.grace_seconds: at most 7 days
TABLE_COLUMNS = ("NAME", "ROLE", "OWNERS", "PRINCIPAL_ARN", "CREATED_AT", "CREATED_BY")
ONCE = "the token is shown this once and never again: keep it now (`leasectl callers rotate {name}` makes a new one)"


def grace(text: str) -> int:
    """`--grace`: seconds, or a number with s, m, h or d (`90`, `30m`, `1h`), from 0 to 7 days."""
    return duration(text, MAX_GRACE_SECONDS, "the longest grace the service gives")


def add_callers_parser(commands: Any) -> None:
    """`callers` and its actions' arguments."""
    callers = commands.add_parser(
        "callers",
        help="manage the service's callers (operators)",
        description="Add, list, rotate and remove the callers of the service (AUTH_MODE token or iam; operators only).",
    )
    actions = callers.add_subparsers(dest="callers_command", metavar="ACTION", required=True)
    add = actions.add_parser(
        "add",
        help="add a caller (its token is printed once)",
        description="Add a caller (POST /v1/callers). In AUTH_MODE=token its token is printed this once and never "
        "again; in iam mode it signs as --principal-arn.",
    )
    add.add_argument("name", metavar="NAME", help="the caller's name ([a-z0-9][a-z0-9-]{0,62})")
    add.add_argument(
        "--owner",
        dest="owners",
        nargs="+",
        action="extend",
        default=[],
        metavar="O",
        help="an owner id it may act as, the first its default (repeatable; a service needs one)",
    )
    add.add_argument("--role", required=True, choices=ROLES, help="service, operator or viewer")
    add.add_argument("--principal-arn", metavar="ARN", help="the IAM user or role it signs as (AUTH_MODE=iam)")
    actions.add_parser("list", help="list the callers", description="List the callers (GET /v1/callers).")
    rotate = actions.add_parser(
        "rotate",
        help="give a caller a new token",
        description="Give the caller a new token, printed this once (POST /v1/callers/NAME/rotate); its previous "
        "tokens keep working for --grace (AUTH_MODE=token).",
    )
    rotate.add_argument("name", metavar="NAME")
    rotate.add_argument(
        "--grace",
        type=grace,
        default=DEFAULT_GRACE_SECONDS,
        metavar="DURATION",
        help=f"how long the previous tokens keep working: 0 to 7d, e.g. 90, 30m, 1h (default "
        f"{format_duration(DEFAULT_GRACE_SECONDS)}; 0 stops them now)",
    )
    remove = actions.add_parser(
        "remove",
        help="remove a caller",
        description="Remove the caller (DELETE /v1/callers/NAME): its tokens and its principal stop working within "
        "the service's AUTH_CACHE_SECONDS; its leases are not touched.",
    )
    remove.add_argument("name", metavar="NAME")
    for name, action in actions.choices.items():
        action.epilog = example_epilog(f"callers {name}")
        action.formatter_class = ExampleFormatter


def format_caller(caller: Caller, token: str | None = None) -> list[str]:
    """Every field of a caller (and its new token) as aligned `name  value` lines."""
    fields = [
        ("name", caller.name),
        ("role", caller.role),
        ("owners", ", ".join(caller.owners) or "-"),
        ("principal_arn", caller.principal_arn or "-"),
        ("created_at", _when(caller.created_at)),
        ("created_by", caller.created_by),
    ]
    return _aligned(fields + ([("token", token)] if token is not None else []))


def format_callers(callers: Sequence[Caller]) -> list[str]:
    """The callers as a table under a header."""
    rows = [TABLE_COLUMNS] + [
        (
            caller.name,
            caller.role,
            ",".join(caller.owners) or "-",
            caller.principal_arn or "-",
            _when(caller.created_at),
            caller.created_by,
        )
        for caller in callers
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(TABLE_COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _aligned(fields: list[tuple[str, str]]) -> list[str]:
    width = max(len(name) for name, _ in fields)
    return [f"{name.ljust(width)}  {value}" for name, value in fields]


def cmd_callers(ctx: Context, client: SchedulerClient) -> int:
    args = ctx.args
    if args.callers_command == "add":
        added = client.callers.add(args.name, role=args.role, owners=args.owners, principal_arn=args.principal_arn)
        _print(ctx, added.raw, format_caller(added.caller, added.token))
        if added.token is not None:
            ctx.stderr.write(f"{PROG}: {ONCE.format(name=args.name)}\n")
    elif args.callers_command == "list":
        callers = client.callers.list()
        if ctx.json:
            ctx.print_json({"callers": [caller.raw for caller in callers]})
        elif callers:
            ctx.stdout.write("\n".join(format_callers(callers)) + "\n")
        else:
            ctx.stdout.write("No callers.\n")
    elif args.callers_command == "rotate":
        token = client.callers.rotate(args.name, grace_seconds=args.grace)
        _print(ctx, {"token": token}, [f"token  {token}"])
        ctx.stderr.write(f"{PROG}: {ONCE.format(name=args.name)}\n")
        if args.grace:
            until = _when(datetime.now(UTC) + timedelta(seconds=args.grace))
            ctx.stderr.write(
                f"{PROG}: the previous tokens of {args.name} keep working for {format_duration(args.grace)} "
                f"(until about {until})\n"
            )
        else:
            ctx.stderr.write(f"{PROG}: the previous tokens of {args.name} stop working now\n")
    else:
        client.callers.remove(args.name)
        _print(
            ctx, {}, [f"removed caller {args.name} (its tokens stop working within the service's AUTH_CACHE_SECONDS)"]
        )
    return EXIT_OK


def _print(ctx: Context, body: dict[str, Any], lines: list[str]) -> None:
    if ctx.json:
        ctx.print_json(body)
    else:
        ctx.stdout.write("\n".join(lines) + "\n")
