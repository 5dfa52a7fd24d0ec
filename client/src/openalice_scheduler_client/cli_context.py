"""What every `leasectl` command runs with: its parsed arguments, where it writes, the exit codes it
returns, and the argument types several commands share. Command modules import this; none imports `cli`."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any, TextIO

from .cli_style import format_lease, painter
from .client import SchedulerClient
from .models import Lease

PROG = "leasectl"
EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_READY = 4
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"([0-9]{1,7})([smhd]?)")


class Context:
    """One run of `leasectl`: the parser (which `completion` describes), its arguments and output streams."""

    def __init__(
        self, parser: argparse.ArgumentParser, args: argparse.Namespace, stdout: TextIO, stderr: TextIO
    ) -> None:
        self.parser = parser
        self.args = args
        self.json = bool(args.json)
        self.stdout = stdout
        self.stderr = stderr

    def client(self, **overrides: Any) -> SchedulerClient:
        args = self.args
        return SchedulerClient(
            args.url,
            args.secret,
            token=args.token,
            auth=args.auth,
            region=args.region,
            profile=args.profile,
            **overrides,
        )

    def show_lease(self, lease: Lease, body: dict[str, Any]) -> None:
        if self.json:
            self.print_json(body)
        else:
            self.stdout.write("\n".join(format_lease(lease, paint=painter(self.stdout))) + "\n")

    def print_json(self, document: Any, *, compact: bool = False) -> None:
        text = json.dumps(document, separators=(",", ":")) if compact else json.dumps(document, indent=2)
        self.stdout.write(text + "\n")
        self.stdout.flush()


Command = Callable[[Context, SchedulerClient], int]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def duration(text: str, longest: int, why: str) -> int:
    """A duration option: seconds, or a number with s, m, h or d (`90`, `30m`, `1h`, `2d`), from 0 to `longest`
    seconds (`why` says what bounds it)."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (seconds, or e.g. 30m, 1h, 2d)")
    seconds = int(found.group(1)) * _UNITS[found.group(2)]
    if seconds > longest:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than {format_duration(longest)}, {why}")
    return seconds


def format_duration(seconds: int) -> str:
    """`1h`, `1h30m`, `45s`, `2d`: the largest units that say it exactly."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
