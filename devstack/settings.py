"""`make run`'s settings: the functions' own, checked before anything starts, and the local stack's numbers.

A bad value is a ConfigurationError naming its variable and what is wrong, which `python -m devstack` prints as
one line before it exits non-zero (no traceback).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from scheduler.errors import ConfigurationError

if TYPE_CHECKING:
    from scheduler.providers.local_docker.hosts import DockerHostSpec


def check_function_settings(environ: Mapping[str, str]) -> None:
    """Refuse what the functions would refuse at their cold start: `make run` passes each of their variables on
    from the variable of the same name (or the template's default, which is valid)."""
    from scheduler.config import Settings

    Settings.from_environ(environ)


def fleet_hosts(environ: Mapping[str, str]) -> tuple[DockerHostSpec, ...]:
    """DOCKER_HOSTS's hosts (the stack reads them whatever PROVIDERS says, to prepare each host's images)."""
    from scheduler.providers.local_docker.hosts import parse_hosts

    try:
        return parse_hosts(environ["DOCKER_HOSTS"])
    except ValueError as error:
        raise ConfigurationError(f"invalid configuration: DOCKER_HOSTS: {error}") from None


def seconds(environ: Mapping[str, str], variable: str, default: float, *, above_zero: bool = True) -> float:
    """A local-only number of seconds, such as 2.5 (`default` when unset or blank)."""
    raw = environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        if not raw.isascii() or "_" in raw:  # `float()` also takes `٢.٥` and `2_5`
            raise ValueError
        value = float(raw)
    except ValueError:
        raise _invalid(variable, raw, "must be a number of seconds in the digits 0-9, such as 2.5") from None
    if not (value > 0 if above_zero else value >= 0) or value == float("inf"):
        raise _invalid(variable, raw, f"must be a number of seconds {'above' if above_zero else 'from'} 0")
    return value


def port(environ: Mapping[str, str], variable: str, default: int) -> int:
    """A TCP port, 1 to 65535 (`default` when unset or blank)."""
    raw = environ.get(variable, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 5 and 1 <= int(raw) <= 65535):
        raise _invalid(variable, raw, "must be a TCP port from 1 to 65535 in the digits 0-9")
    return int(raw)


def _invalid(variable: str, raw: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"invalid configuration: {variable}={raw!r}: {problem}")
