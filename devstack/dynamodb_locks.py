"""The embedded DynamoDB's locks: per item, so two writes to one item run one after the other while writes
to different items do not wait, and a transaction holds all its items at once (conflicting as DynamoDB's
do); and per table, a reader/writer lock around moto's own data structures. One set per process (`ITEMS`,
`TABLES`), as there is one moto backend per process."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

from devstack.dynamodb_faults import item_conflict, transaction_conflict

Key = tuple[str, str]  # (table name, canonical JSON of the item's key)


class _ReadWriteLock:
    """Many readers or one writer; a waiting writer holds back new readers (no writer starvation)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class ItemLocks:
    """Which items a write or a transaction is working on right now."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holders: dict[Key, str] = {}  # "write" or "transaction"
        self.conflicts = 0  # refusals because another transaction held an item (not injected ones)

    @contextlib.contextmanager
    def write(self, keys: Iterable[Key]) -> Iterator[None]:
        """Hold `keys` for single-item writes: wait for other writes, refuse if a transaction holds one."""
        wanted = sorted(set(keys))
        taken: list[Key] = []
        try:
            for key in wanted:  # in sorted order, so two batch writes cannot wait on each other
                with self._cond:
                    while self._holders.get(key) == "write":
                        self._cond.wait()
                    if self._holders.get(key) == "transaction":
                        self.conflicts += 1
                        raise item_conflict()
                    self._holders[key] = "write"
                    taken.append(key)
            yield
        finally:
            self._release(taken)

    @contextlib.contextmanager
    def transaction(self, keys: list[Key]) -> Iterator[None]:
        """Hold every key of a transaction at once; cancelled with TransactionConflict if another holds one."""
        with self._cond:
            while True:
                for index, key in enumerate(keys):
                    if self._holders.get(key) == "transaction":
                        self.conflicts += 1
                        raise transaction_conflict(len(keys), index)
                if not any(key in self._holders for key in keys):
                    break
                self._cond.wait()  # a single-item write finishes within one moto call
            for key in keys:
                self._holders[key] = "transaction"
        try:
            yield
        finally:
            self._release(keys)

    def _release(self, keys: Iterable[Key]) -> None:
        with self._cond:
            for key in keys:
                self._holders.pop(key, None)
            self._cond.notify_all()


class TableLocks:
    """A reader/writer lock per table around moto's data structures, and one around its catalog."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, _ReadWriteLock] = {}
        self.catalog = _ReadWriteLock()

    def of(self, table: str) -> _ReadWriteLock:
        with self._lock:
            return self._tables.setdefault(table, _ReadWriteLock())

    @contextlib.contextmanager
    def shared(self, tables: Iterable[str]) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for table in sorted(set(tables)):
                stack.enter_context(self.of(table).shared())
            yield

    @contextlib.contextmanager
    def exclusive(self, tables: Iterable[str]) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for table in sorted(set(tables)):
                stack.enter_context(self.of(table).exclusive())
            yield


ITEMS = ItemLocks()
TABLES = TableLocks()
