"""A provider account's request budget in memory: `store/api_budget.py`'s item and arithmetic, under one lock.

The windows are counted as `ApiBudget` counts them (`take_one`, `corrected`), in an item of the same
attributes in the counters table; the lock stands for the item's `version`, so no attempt is ever lost.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence

from scheduler.store.api_budget import QuotaWindow, Reserve, WindowState, corrected, take_one
from scheduler.store.memory.tables import Attributes, CounterTable


class MemoryApiBudget:
    """Take requests from a shared quota; correct it from what the provider reports (`ApiBudgetPort`)."""

    def __init__(self, table: CounterTable | None = None, lock: threading.RLock | None = None) -> None:
        self._table = table or CounterTable()
        self._lock = lock or threading.RLock()

    def take(self, key: str, windows: Sequence[QuotaWindow], reserve: Reserve, now_ms: int) -> int:
        """0 when one request was taken from every window, else the milliseconds until one frees up."""
        with self._lock:
            states, known = self._read(key)
            in_force = known or tuple(windows)
            taken, wait = take_one(states, in_force, reserve(in_force), now_ms)
            if not wait:
                self._write(key, taken, in_force)
            return wait

    def observe(
        self, key: str, windows: Sequence[QuotaWindow], reported: Mapping[str, tuple[int, float]], now_ms: int
    ) -> None:
        """The provider's own count (window → remaining, seconds to reset) corrects ours."""
        with self._lock:
            states, known = self._read(key)
            changed = corrected(states, windows, reported, now_ms)
            if changed is None and tuple(known) == tuple(windows):
                return
            self._write(key, changed if changed is not None else states, windows)

    def _read(self, key: str) -> tuple[dict[str, WindowState], tuple[QuotaWindow, ...]]:
        item = self._table.items.get(key, {})

        def number(name: str) -> int:
            return int(item.get(name, 0))

        names = {attribute.split("_", 1)[1] for attribute in item if attribute.startswith("used_")}
        states = {
            name: WindowState(number(f"used_{name}"), number(f"reset_{name}"), number(f"tail_{name}")) for name in names
        }
        known = tuple(QuotaWindow(str(n), int(q), int(w)) for n, q, w in json.loads(str(item.get("windows", "[]"))))
        return states, known

    def _write(self, key: str, states: Mapping[str, WindowState], windows: Sequence[QuotaWindow]) -> None:
        item: Attributes = {
            "version": int(self._table.items.get(key, {}).get("version", 0)) + 1,
            "windows": json.dumps([[window.name, window.quota, window.seconds] for window in windows]),
        }
        for name, state in states.items():
            if any(window.name == name for window in windows):  # a window no longer advertised is dropped
                item.update({f"used_{name}": state.used, f"reset_{name}": state.reset, f"tail_{name}": state.tail})
        self._table.items[key] = item
