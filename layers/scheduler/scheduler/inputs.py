"""Hand-written validation of every input at the edge (the acquire and renew bodies, the queries), as
strict as a pydantic model with `extra="forbid"` and strict types, without pydantic's import and model
building (about 130 ms of the acquire function's init on the build machine, more than its Docker SDK).
Problems come out as `errors.invalid_input` names them: one `{"field", "problem"}` per problem, in
pydantic's wording.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from scheduler.errors import InvalidRequest, invalid_input

Choice = TypeVar("Choice", bound=StrEnum)
_NOT_A_STRING = "Input should be a valid string"


def is_text(value: object) -> bool:
    """A string DynamoDB and every header can carry: UTF-8 encodable (no lone surrogate, which JSON's
    `\\ud800` escapes and a decoded query can both produce)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


class LongNumber:
    """An integer literal in a JSON body with more digits than Python converts (`sys.get_int_max_str_digits()`,
    4300 by default): the body is still JSON, and this stands for the number, which is no value of any field,
    so the field it sits in is named with what is wrong."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    @property
    def problem(self) -> str:
        return f"Input should be a number of at most {sys.get_int_max_str_digits()} digits, not {self.digits}"


def json_int(literal: str) -> int | LongNumber:
    """A JSON integer literal as `json` reads it (`parse_int`), or a LongNumber when it is too long to read."""
    try:
        return int(literal)
    except ValueError:  # only the digit limit: the JSON grammar has made sure of the rest
        return LongNumber(len(literal.lstrip("-")))


class Fields:
    """Reads the fields of one input (a JSON object or a query) and collects every problem with them."""

    def __init__(self, data: Mapping[str, object], allowed: tuple[str, ...]) -> None:
        self._data = data
        self.problems: list[dict[str, str]] = []
        self._extra = [name for name in data if name not in allowed]

    def problem(self, field: str, problem: str) -> None:
        self.problems.append({"field": field, "problem": problem})

    def text(
        self,
        name: str,
        *,
        max_length: int,
        pattern: re.Pattern[str] | None = None,
        blank_is_absent: bool = False,
        required: bool = False,
    ) -> str | None:
        """A string field (absent or null, or blank when `blank_is_absent`: None, a problem when `required`);
        no other JSON type is taken for one."""
        value = self._data.get(name)
        if value is None or (blank_is_absent and value == ""):
            if required:
                self.problem(name, "Field required")
            return None
        if not is_text(value):
            self.problem(name, _NOT_A_STRING)
            return None
        assert isinstance(value, str)  # noqa: S101 - narrowing for mypy  # nosec B101
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
        return self._member(name, value, choices)

    def required_choice(self, name: str, choices: type[Choice]) -> Choice | None:
        """One of an enum's values, which must be there (None only alongside a problem)."""
        if name not in self._data:
            self.problem(name, "Field required")
            return None
        return self._member(name, self._data[name], choices)

    def choice_or(self, name: str, choices: type[Choice], default: Choice) -> Choice:
        """One of an enum's values, `default` when absent; null is no value of it."""
        if name not in self._data:
            return default
        return self._member(name, self._data[name], choices) or default

    def _member(self, name: str, value: object, choices: type[Choice]) -> Choice | None:
        if isinstance(value, str) and value in choices._value2member_map_:
            return choices(value)
        self.problem(name, "Input should be " + " or ".join(f"'{choice.value}'" for choice in choices))
        return None

    def whole_number(self, name: str, default: int, lowest: int, highest: int, message: str, *, digits: int) -> int:
        """A whole number (a JSON integer, or a query's ASCII digits, at most `digits` of them after any
        leading zeros) in lowest..highest; `message` names the rule when the value is no whole number at all."""
        value = self._data.get(name)
        if value is None and name not in self._data:
            return default
        if isinstance(value, str):
            if not (value.isascii() and value.isdigit() and len(value.lstrip("0")) <= digits):
                self.problem(name, f"Value error, {message}")
                return default
            number = int(value)
            self._within(name, number, lowest, highest)
            return number
        found = self._integer(name, value, lowest, highest)
        return default if found is None else found

    def strict_int(self, name: str, lowest: int, highest: int) -> int | None:
        """A JSON integer (never a float, string or boolean) in lowest..highest; absent or null: None."""
        value = self._data.get(name)
        if value is None:
            return None
        return self._integer(name, value, lowest, highest)

    def strict_int_or(self, name: str, default: int, lowest: int, highest: int) -> int:
        """A JSON integer in lowest..highest, `default` when absent; null is no integer."""
        if name not in self._data:
            return default
        found = self._integer(name, self._data[name], lowest, highest)
        return default if found is None else found

    def _integer(self, name: str, value: object, lowest: int, highest: int) -> int | None:
        if isinstance(value, LongNumber):
            self.problem(name, value.problem)
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(name, "Input should be a valid integer")
            return None
        self._within(name, value, lowest, highest)
        return value

    def _within(self, name: str, value: float, lowest: float, highest: float) -> None:
        if value < lowest:
            self.problem(name, f"Input should be greater than or equal to {lowest}")
        elif value > highest:
            self.problem(name, f"Input should be less than or equal to {highest}")

    def amount(self, name: str, lowest: float, highest: float) -> float | None:
        """A JSON number in lowest..highest (an integer taken as its float; never a string, a boolean or
        a non-finite value, which Python's JSON decoder lets through); absent or null: None."""
        value = self._data.get(name)
        if value is None:
            return None
        if isinstance(value, LongNumber):
            self.problem(name, value.problem)
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem(name, "Input should be a valid number")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.problem(name, "Input should be a finite number")
            return None
        self._within(name, value, lowest, highest)  # before float(): a 400-digit integer has no float
        return float(value) if lowest <= value <= highest else None

    def flag(self, name: str, default: bool) -> bool:
        """A query's `true` or `false` (or a JSON boolean); `default` when absent."""
        value = self._data.get(name)
        if value is None and name not in self._data:
            return default
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        self.problem(name, f"Value error, {name} must be true or false")
        return default

    def text_map(
        self, name: str, *, max_entries: int, key_pattern: re.Pattern[str], max_value_length: int
    ) -> dict[str, str]:
        """A JSON object of strings to strings: at most `max_entries`, keys matching `key_pattern`,
        values of at most `max_value_length` characters with no NUL; `{}` when absent."""
        value = self._data.get(name, {})
        if not isinstance(value, dict):
            self.problem(name, "Input should be a valid dictionary")
            return {}
        if len(value) > max_entries:
            self.problem(name, f"Dictionary should have at most {max_entries} items after validation, not {len(value)}")
            return {}
        found: dict[str, str] = {}
        for key, item in value.items():
            if not is_text(item):
                self.problem(f"{name}.{_shown(key)}", _NOT_A_STRING)
            elif len(item) > max_value_length:
                self.problem(f"{name}.{_shown(key)}", f"String should have at most {max_value_length} characters")
            elif "\x00" in item:
                self.problem(f"{name}.{_shown(key)}", "String should not contain NUL")
            else:
                found[key] = item
        bad = sorted(key for key in value if not (is_text(key) and key_pattern.fullmatch(key)))
        if bad:
            shown = ", ".join(_shown(key) for key in bad[:5])
            self.problem(name, f"Value error, {name} keys must match {key_pattern.pattern}: {shown}")
        return found

    def check(self, what: str) -> None:
        """Raise InvalidRequest naming every problem (unknown fields last), if there is any."""
        for name in self._extra:
            self.problem(_shown(name), "Extra inputs are not permitted")
        if self.problems:
            raise invalid_input(what, self.problems)


def _shown(text: str) -> str:
    """`text` for a message: what UTF-8 cannot carry escaped (a lone surrogate would break the answer)."""
    return text.encode("utf-8", "backslashreplace").decode()


def fields_of(data: object, what: str, allowed: tuple[str, ...]) -> Fields:
    """A JSON object's (or a query's) fields; InvalidRequest when `data` is no object."""
    if not isinstance(data, Mapping):
        raise InvalidRequest(f"{what} must be a JSON object")
    return Fields(data, allowed)
