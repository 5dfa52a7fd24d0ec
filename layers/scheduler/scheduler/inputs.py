"""Hand-written validation of the few read inputs (queries, the renew body), as strict as a pydantic
model with `extra="forbid"` and strict strings, without pydantic's import and model-building cost at a
read function's cold start. Problems come out in the same shape as the acquire path's (`errors.invalid_input`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from scheduler.errors import InvalidRequest, invalid_input

Choice = TypeVar("Choice", bound=StrEnum)


class Fields:
    """Reads the fields of one input (a JSON object or a query) and collects every problem with them."""

    def __init__(self, data: Mapping[str, object], allowed: tuple[str, ...]) -> None:
        self._data = data
        self.problems: list[dict[str, str]] = []
        self._extra = [name for name in data if name not in allowed]

    def problem(self, field: str, problem: str) -> None:
        self.problems.append({"field": field, "problem": problem})

    def text(self, name: str, *, max_length: int, pattern: re.Pattern[str] | None = None) -> str | None:
        """A string field (absent or null: None); no other JSON type is taken for one."""
        value = self._data.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            self.problem(name, "Input should be a valid string")
            return None
        if len(value) > max_length:
            self.problem(name, f"String should have at most {max_length} characters")
            return None
        if pattern is not None and not pattern.fullmatch(value):
            self.problem(name, f"String should match pattern '^{pattern.pattern}$'")
            return None
        return value

    def choice(self, name: str, choices: type[Choice]) -> Choice | None:
        """One of an enum's values (absent or null: None)."""
        value = self._data.get(name)
        if value is None:
            return None
        if isinstance(value, str) and value in choices._value2member_map_:
            return choices(value)
        self.problem(name, "Input should be " + " or ".join(f"'{choice.value}'" for choice in choices))
        return None

    def whole_number(self, name: str, default: int, lowest: int, highest: int, message: str, *, digits: int) -> int:
        """A whole number (a JSON integer, or a query's ASCII digits, at most `digits` of them) in
        lowest..highest; `message` names the rule when the value is no whole number at all."""
        value = self._data.get(name)
        if value is None and name not in self._data:
            return default
        if isinstance(value, str):
            if not (value.isascii() and value.isdigit() and len(value) <= digits):
                self.problem(name, f"Value error, {message}")
                return default
            number = int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            self.problem(name, "Input should be a valid integer")
            return default
        if number < lowest:
            self.problem(name, f"Input should be greater than or equal to {lowest}")
        elif number > highest:
            self.problem(name, f"Input should be less than or equal to {highest}")
        return number

    def strict_int(self, name: str, lowest: int, highest: int) -> int | None:
        """A JSON integer (never a float, string or boolean) in lowest..highest; absent or null: None."""
        value = self._data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(name, "Input should be a valid integer")
            return None
        if value < lowest:
            self.problem(name, f"Input should be greater than or equal to {lowest}")
        elif value > highest:
            self.problem(name, f"Input should be less than or equal to {highest}")
        return value

    def check(self, what: str) -> None:
        """Raise InvalidRequest naming every problem (unknown fields last), if there is any."""
        for name in self._extra:
            self.problem(name, "Extra inputs are not permitted")
        if self.problems:
            raise invalid_input(what, self.problems)


def fields_of(data: object, what: str, allowed: tuple[str, ...]) -> Fields:
    """A JSON object's (or a query's) fields; InvalidRequest when `data` is no object."""
    if not isinstance(data, Mapping):
        raise InvalidRequest(f"{what} must be a JSON object")
    return Fields(data, allowed)
