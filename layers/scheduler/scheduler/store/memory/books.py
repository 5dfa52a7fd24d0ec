"""The counters, prices and usage of the memory store (`CountersPort`, `UsagePort`), beside its leases.

As `store/counters.py`, `prices.py` and `usage.py` read them from DynamoDB: a store without a counters table
refuses limits (RuntimeError) and has seen no prices, one without a usage table keeps no usage.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from scheduler.store.counters import CounterState
from scheduler.store.memory.api_budget import MemoryApiBudget
from scheduler.store.memory.reads import MemoryReads
from scheduler.store.memory.tables import CounterTable
from scheduler.store.usage import UsageRow


class MemoryBooks(MemoryReads):
    """The counters table (counters, prices, API quotas) and the usage table."""

    def counters(self, names: Sequence[str]) -> dict[str, int]:
        if not names:
            return {}
        with self._lock:
            book = self._book()
            return {name: book.value(name) for name in names}

    def counter_values(self) -> dict[str, int]:
        return {name: state.leases for name, state in self.counter_states().items()}

    def counter_states(self) -> dict[str, CounterState]:
        with self._lock:
            return self._book().states()

    def suspect_counter(self, counter: str, version: int, expected: int, now: datetime) -> bool:
        with self._lock:
            return self._book().suspect(counter, version, expected, now)

    def repair_counter(self, counter: str, version: int, actual: int) -> bool:
        with self._lock:
            return self._book().repair(counter, version, actual)

    def seen_prices(self, keys: Sequence[str], now: datetime) -> dict[str, int]:
        if not keys or self._counter_table is None:
            return {}
        with self._lock:
            return self._counter_table.seen_prices(keys, now)

    def note_price(self, key: str, price_micros: int, now: datetime) -> None:
        if self._counter_table is None:
            return
        with self._lock:
            self._counter_table.note_price(key, price_micros, now)

    def usage_rows(self, owner_id: str | None, since: str, until: str) -> Iterator[UsageRow]:
        if self._usage_table is None:
            return iter(())
        with self._lock:
            return iter(list(self._usage_table.rows(owner_id, since, until)))

    def api_budget(self) -> MemoryApiBudget:
        """The provider request budgets, kept in this store's counters table (`ApiBudgetPort`)."""
        return MemoryApiBudget(self._book(), self._lock)

    # --- what DynamoDB does behind the store's back, for tests ---------------------------------

    def drift_counter(self, counter: str, leases: int) -> None:
        """Set a counter as a lost write leaves it: its value changes, its version does not."""
        with self._lock:
            book = self._book()
            book.items[counter] = {**book.items.get(counter, {}), "leases": leases}

    def _book(self) -> CounterTable:
        if self._counter_table is None:
            raise RuntimeError("lease limits are configured but COUNTERS_TABLE is not")
        return self._counter_table
