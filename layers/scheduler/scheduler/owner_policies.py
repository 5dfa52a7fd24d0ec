"""OWNER_POLICIES: each owner's weight (its share of contended capacity) and the highest priority it may ask for.

`{"<owner>": {"weight": 2, "max_priority": 80}, "*": {...}}`: an owner without an entry of its own takes `"*"`'s,
and a key an entry leaves out comes from `"*"`, then from the defaults (weight 1, max priority 100). Leases
without an owner are the shared owner `-`'s. Parsed once with the settings (a bad value refuses to start).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

DEFAULT_WEIGHT = 1.0
MAX_PRIORITY = 100
ANY_OWNER = "*"
_KEYS = frozenset({"weight", "max_priority"})


class OwnerPolicy(NamedTuple):
    """One owner's share of contended capacity, relative to the others' (`weight`), and its highest priority."""

    weight: float = DEFAULT_WEIGHT
    max_priority: int = MAX_PRIORITY


class OwnerPolicies:
    """The policies by owner, and the one for every owner without an entry (`"*"`)."""

    __slots__ = ("_default", "_entries")

    def __init__(self, entries: Mapping[str, OwnerPolicy] | None = None, default: OwnerPolicy | None = None) -> None:
        self._entries = tuple(sorted((entries or {}).items()))
        self._default = default or OwnerPolicy()

    def of(self, owner: str) -> OwnerPolicy:
        """The policy of `owner` (a budget owner: `-` for leases without one)."""
        return dict(self._entries).get(owner, self._default)

    def weight(self, owner: str) -> float:
        return self.of(owner).weight

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OwnerPolicies) and (self._entries, self._default) == (other._entries, other._default)

    def __hash__(self) -> int:
        return hash((self._entries, self._default))

    def __repr__(self) -> str:
        return f"OwnerPolicies({dict(self._entries)!r}, default={self._default!r})"

    @classmethod
    def parse(cls, raw: str) -> OwnerPolicies:
        """From OWNER_POLICIES' JSON; ValueError naming what is wrong."""
        try:
            document = json.loads(raw)
        except ValueError as error:
            raise ValueError(f"must be a JSON object of owners to policies: {error}") from None
        if not isinstance(document, dict):
            raise ValueError('must be a JSON object of owners to policies, such as {"anim": {"weight": 2}}')
        star = _policy(ANY_OWNER, document.get(ANY_OWNER, {}), OwnerPolicy())
        entries = {owner: _policy(owner, value, star) for owner, value in document.items() if owner != ANY_OWNER}
        return cls(entries, star)


def _policy(owner: str, value: Any, fallback: OwnerPolicy) -> OwnerPolicy:
    if not isinstance(value, dict):
        raise ValueError(f"the policy of {owner!r} must be an object with weight and/or max_priority")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ValueError(f"the policy of {owner!r} has unknown keys {unknown} (known: max_priority, weight)")
    weight = value.get("weight", fallback.weight)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight <= 0:
        raise ValueError(f"the weight of {owner!r} must be a number above 0")
    highest = value.get("max_priority", fallback.max_priority)
    if isinstance(highest, bool) or not isinstance(highest, int) or not 0 <= highest <= MAX_PRIORITY:
        raise ValueError(f"the max_priority of {owner!r} must be a whole number from 0 to {MAX_PRIORITY}")
    return OwnerPolicy(float(weight), highest)
