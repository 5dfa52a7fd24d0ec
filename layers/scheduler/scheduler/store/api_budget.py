"""A provider's API request quota as one budget shared by every invocation: an item in the counters table.

The item `api-quota#<provider>#<account>` mirrors the provider's fixed windows (RunPod: per minute, per
hour, per day): for each window, the requests used and when the window resets (epoch milliseconds). A
caller takes one request from every window before each API call, with an optimistic write (the item's
`version`), so concurrent invocations never spend the same request twice; and after each answer the
provider's own count (`RateLimit`: remaining, seconds to reset) corrects ours when it says more are used
or names another reset. Requests of low priority (creates) leave `reserve` requests of each window to
those of high priority (releases and their confirmation); the caller says how many as a function of the
windows the item holds, which may be newer than the ones the caller has seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from scheduler.store.client import TableClient
from scheduler.store.items import number_attr, string_attr

_ATTEMPTS = 20


class QuotaWindow(NamedTuple):
    """At most `quota` requests per `seconds` (fixed windows)."""

    name: str
    quota: int
    seconds: int


class WindowState(NamedTuple):
    """One window as counted: requests used, when it resets (epoch ms), and how many of them were taken in
    its last second (the provider's reset is known to the second only, so those may fall in its next window)."""

    used: int = 0
    reset: int = 0
    tail: int = 0


TAIL_MS = 1000

# What a call keeps back of every window, given the windows in force.
Reserve = Callable[[Sequence[QuotaWindow]], int]


def advance(state: WindowState, window: QuotaWindow, now_ms: int) -> WindowState:
    """The window as it stands at `now_ms`: past its reset it starts again, one window on from the last
    reset (so it stays aligned with the provider's), carrying the last second's requests."""
    if state.reset == 0:
        return WindowState(0, now_ms + window.seconds * 1000, 0)  # first sight: a guess until an answer names it
    if state.reset > now_ms:
        return state
    periods = max(1, (now_ms - state.reset) // (window.seconds * 1000) + 1)
    carried = state.tail if periods == 1 else 0
    return WindowState(carried, state.reset + periods * window.seconds * 1000, 0)


def take_one(
    states: Mapping[str, WindowState], windows: Sequence[QuotaWindow], reserve: int, now_ms: int
) -> tuple[dict[str, WindowState], int]:
    """(the windows after taking one request, 0) or (unchanged, milliseconds until one frees up)."""
    current = {window.name: advance(states.get(window.name, WindowState()), window, now_ms) for window in windows}
    waits = [
        current[window.name].reset - now_ms
        for window in windows
        if current[window.name].used + 1 > (max(1, window.quota - reserve) if reserve else window.quota)
    ]
    if waits:
        return current, max(1, max(waits))
    taken = {}
    for window in windows:
        state = current[window.name]
        in_tail = state.reset - now_ms <= TAIL_MS
        taken[window.name] = WindowState(state.used + 1, state.reset, state.tail + (1 if in_tail else 0))
    return taken, 0


def corrected(
    states: Mapping[str, WindowState],
    windows: Sequence[QuotaWindow],
    reported: Mapping[str, tuple[int, float]],
    now_ms: int,
) -> dict[str, WindowState] | None:
    """The windows after the provider's own count (remaining, seconds to reset); None when nothing changes.

    The count is only ever raised (requests we took may not have reached it yet). Its reset, known to
    the whole second (rounded up), moves ours earlier within that second, or to a later window if ours
    was a guess."""
    current = {window.name: advance(states.get(window.name, WindowState()), window, now_ms) for window in windows}
    changed = False
    for window in windows:
        if window.name not in reported:
            continue
        remaining, seconds = reported[window.name]
        state = current[window.name]
        used = max(state.used, window.quota - remaining)
        named = now_ms + int(seconds * 1000)
        reset = state.reset
        if named < reset or named > reset + TAIL_MS:
            reset = named
        if (used, reset) != (state.used, state.reset):
            current[window.name] = WindowState(used, reset, state.tail)
            changed = True
    return current if changed else None


class ApiBudget(TableClient):
    """Take requests from a shared quota; correct it from what the provider reports."""

    def take(self, key: str, windows: Sequence[QuotaWindow], reserve: Reserve, now_ms: int) -> int:
        """Take one request from every window, keeping `reserve(windows in force)` of each back: 0 when
        taken, else the milliseconds until the fullest window resets (nothing taken). The windows in
        force are the item's (the last advertised) when it has them, else `windows`."""
        for _ in range(_ATTEMPTS):
            states, version, known = self._read(key)
            in_force = known or tuple(windows)
            taken, wait = take_one(states, in_force, reserve(in_force), now_ms)
            if wait:
                return wait
            if self._write(key, taken, version, in_force):
                return 0
        return 1000  # heavy contention: let the caller wait a moment and try again

    def observe(
        self, key: str, windows: Sequence[QuotaWindow], reported: Mapping[str, tuple[int, float]], now_ms: int
    ) -> None:
        """The provider's own count (window → remaining, seconds to reset) corrects ours."""
        for _ in range(_ATTEMPTS):
            states, version, known = self._read(key)
            changed = corrected(states, windows, reported, now_ms)
            if changed is None and tuple(known) == tuple(windows):
                return
            if self._write(key, changed if changed is not None else states, version, windows):
                return

    def _read(self, key: str) -> tuple[dict[str, WindowState], int, tuple[QuotaWindow, ...]]:
        response = self._call(
            "GetItem", TableName=self._counters(), Key={"counter": string_attr(key)}, ConsistentRead=True
        )
        item = response.get("Item", {})

        def number(name: str) -> int:
            return int(item.get(name, {}).get("N", "0"))

        names = {attribute.split("_", 1)[1] for attribute in item if attribute.startswith("used_")}
        states = {
            name: WindowState(number(f"used_{name}"), number(f"reset_{name}"), number(f"tail_{name}")) for name in names
        }
        known = tuple(
            QuotaWindow(str(n), int(q), int(w)) for n, q, w in json.loads(item.get("windows", {}).get("S", "[]"))
        )
        return states, number("version"), known

    def _write(self, key: str, states: Mapping[str, WindowState], version: int, windows: Sequence[QuotaWindow]) -> bool:
        # The windows as last advertised, so an environment that has not seen an answer yet uses them too.
        advertised = json.dumps([[window.name, window.quota, window.seconds] for window in windows])
        item: dict[str, Any] = {
            "counter": string_attr(key),
            "version": number_attr(version + 1),
            "windows": string_attr(advertised),
        }
        for name, state in states.items():
            if all(window.name != name for window in windows):
                continue  # a window no longer advertised
            item[f"used_{name}"] = number_attr(state.used)
            item[f"reset_{name}"] = number_attr(state.reset)
            item[f"tail_{name}"] = number_attr(state.tail)
        condition = "attribute_not_exists(#version)" if version == 0 else "#version = :version"
        values = {} if version == 0 else {":version": number_attr(version)}
        try:
            self._call(
                "PutItem",
                TableName=self._counters(),
                Item=item,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#version": "version"},
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except self._errors.ConditionalCheckFailedException:
            return False
        return True
