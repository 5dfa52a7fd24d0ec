"""How `leasectl` looks: colours for lease statuses (terminals only, never with NO_COLOR) and the
example each subcommand's `--help` ends with."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TextIO

RESET = "\x1b[0m"
STATUS_COLOURS = {
    "active": "\x1b[32m",  # green: serving
    "pending": "\x1b[33m",  # yellow: on its way
    "releasing": "\x1b[33m",
    "failed": "\x1b[31m",  # red: look at failure_reason
    "released": "\x1b[2m",  # dim: over
    "expired": "\x1b[2m",
}

Paint = Callable[[str, str], str]


def wants_colour(stream: TextIO, environ: dict[str, str] | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything (https://no-color.org)."""
    variables = os.environ if environ is None else environ
    if variables.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def paint_status(status: str, text: str) -> str:
    """`text` (a status, maybe padded) in its status's colour."""
    colour = STATUS_COLOURS.get(status)
    return f"{colour}{text}{RESET}" if colour else text


def no_paint(status: str, text: str) -> str:
    return text


def painter(stream: TextIO) -> Paint:
    """How statuses are written on `stream`."""
    return paint_status if wants_colour(stream) else no_paint


EXAMPLES: dict[str, str] = {
    "acquire": "leasectl acquire --kind renderer --ttl 600 --owner anim-svc --env SCENE=intro\n"
    "  leasectl acquire --gpu high --wait 300       # returns once the worker is ready",
    "wait": "leasectl wait 10eb885b-1051-480d-b839-dafaec1f503f --timeout 300",
    "list": "leasectl list --owner anim-svc --provider local-docker --status active",
    "get": "leasectl --json get 10eb885b-1051-480d-b839-dafaec1f503f",
    "renew": "leasectl renew 10eb885b-1051-480d-b839-dafaec1f503f --ttl 900 --owner anim-svc",
    "release": "leasectl release 10eb885b-1051-480d-b839-dafaec1f503f --owner anim-svc\n"
    "  leasectl release --owner anim-svc --all      # every live lease of anim-svc",
    "watch": "leasectl watch --interval 2",
    "usage": "leasectl usage --owner anim-svc --since 2026-11-01 --group-by provider",
    "health": "leasectl health",
    "logs": "leasectl logs 10eb885b-1051-480d-b839-dafaec1f503f --tail 50 --follow --owner anim-svc",
    "completion": 'eval "$(leasectl completion bash)"      # or: leasectl completion fish | source',
}


def example_epilog(command: str) -> str | None:
    """The `--help` epilog of `command`: its example."""
    example = EXAMPLES.get(command)
    return None if example is None else f"example:\n  {example}"
