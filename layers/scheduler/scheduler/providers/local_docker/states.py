"""What a container's engine state means for its lease: stopped (and why), booting, or ready. Pure Python."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any

from scheduler.providers.base import Readiness

# Engine states of a container that no longer serves its lease.
STOPPED_STATES = ("exited", "dead", "restarting")


def is_stopped(container: Mapping[str, Any]) -> bool:
    return str(container.get("State", "")).lower() in STOPPED_STATES


def reason_from_state(state: Mapping[str, Any]) -> str | None:
    """Why a container in this inspect `State` no longer serves its lease; None while it runs (or starts)."""
    status = str(state.get("Status", "")).lower()
    code = state.get("ExitCode")
    if status == "exited":
        return f"the worker container exited with code {code}{_how_it_ended(state)} at {_time(state.get('FinishedAt'))}"
    if status == "dead":
        error = state.get("Error")
        return "the worker container is dead (the engine could not stop or remove it)" + (f": {error}" if error else "")
    if status == "restarting" or state.get("Restarting"):
        return f"the worker container is stuck restarting (last exit code {code}{_how_it_ended(state)})"
    return None


def readiness_from_state(state: Mapping[str, Any]) -> Readiness:
    """A booting container from its inspect `State`: running (and healthy when it has a healthcheck) is ready."""
    stopped = reason_from_state(state)
    if stopped is not None:
        return Readiness.failed(stopped)
    status = str(state.get("Status", "")).lower()
    if status != "running":
        return Readiness.starting(f"container {status or 'not running yet'}")
    health = state.get("Health")
    if not isinstance(health, Mapping):
        return Readiness.ready()
    health_status = str(health.get("Status", "")).lower()
    if health_status == "healthy":
        return Readiness.ready()
    log = health.get("Log") or []
    last = log[-1].get("Output", "").strip()[:200] if log and isinstance(log[-1], Mapping) else ""
    return Readiness.starting(f"healthcheck {health_status or 'pending'}" + (f": {last}" if last else ""))


def _how_it_ended(state: Mapping[str, Any]) -> str:
    if state.get("OOMKilled"):
        return ", killed by the kernel's OOM killer"
    code = state.get("ExitCode")
    if isinstance(code, int) and 128 < code < 128 + 65:
        try:
            return f", {signal.Signals(code - 128).name}"
        except ValueError:
            return f", signal {code - 128}"
    return ""


def _time(value: object) -> str:
    text = str(value or "")
    return text[:19] + "Z" if len(text) >= 19 and not text.startswith("0001") else "an unknown time"
