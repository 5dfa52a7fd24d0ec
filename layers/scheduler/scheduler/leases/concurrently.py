"""Bounded concurrency for the sweep's passes: provider and DynamoDB calls mostly wait on the network."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_bounded(action: Callable[[Item], Result], items: Sequence[Item], limit: int, name: str) -> list[Result]:
    """`action` on each item, at most `limit` at a time, the results in the items' order (one at a time: in the
    calling thread, no pool)."""
    workers = max(1, min(limit, len(items)))
    if workers == 1:
        return [action(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
        return list(pool.map(action, items))
