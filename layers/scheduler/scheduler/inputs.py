"""Hand-written validation of every input at the edge (the acquire and renew bodies, the queries), as
strict as a pydantic model with `extra="forbid"` and strict types, without pydantic's import and model
building (about 130 ms of the acquire function's init on the build machine, more than its Docker SDK).
Problems come out as `errors.invalid_input` names them: one `{"field", "problem"}` per problem, in
pydantic's wording.

Every bound, length, pattern, enum, default and requirement is a rule of `scheduler.wire`, which
`make contract` generates from openapi.yaml; what openapi.yaml cannot say stays here, named: a JSON
integer is an integer literal (`600.0` is no ttl), a string is one UTF-8 can carry (`is_text`), a
query's whole number is ASCII digits, of at most so many (`whole_number`), and a blank label is an
absent one (`blank_is_absent`).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Container, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from scheduler.errors import InvalidRequest, invalid_input

if TYPE_CHECKING:
    from scheduler.wire import BooleanRule, ChoiceRule, IntegerRule, NumberRule, TextListRule, TextMapRule, TextRule

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
    """Reads the fields of one input (a JSON object or a query) by their rules, collecting every problem."""

    def __init__(self, data: Mapping[str, object], allowed: Container[str]) -> None:
        self._data = data
        self.problems: list[dict[str, str]] = []
        self._extra = [name for name in data if name not in allowed]

    def problem(self, field: str, problem: str) -> None:
        self.problems.append({"field": field, "problem": problem})

    def text(
        self,
        name: str,
        rule: TextRule,
        *,
        blank_is_absent: bool = False,
        mismatch: str | None = None,
        check_pattern: bool = True,
    ) -> str | None:
        """A string field (absent or null, or blank when `blank_is_absent`: None, a problem when the rule
        requires it); no other JSON type is taken for one. `mismatch` words a value the rule's pattern refuses
        (pydantic's words by default); `check_pattern=False` leaves the pattern to a reader that says more."""
        value = self._data.get(name)
        if value is None or (blank_is_absent and value == ""):
            if rule["required"]:
                self.problem(name, "Field required")
            return None
        if not is_text(value):
            self.problem(name, _NOT_A_STRING)
            return None
        assert isinstance(value, str)  # noqa: S101 - narrowing for mypy  # nosec B101
        problem = text_problem(value, rule, mismatch, check_pattern=check_pattern)
        if problem is not None:
            self.problem(name, problem)
            return None
        return value

    def choice(self, name: str, rule: ChoiceRule, choices: type[Choice]) -> Choice | None:
        """One of the rule's values, as `choices`' member (absent or null: None)."""
        value = self._data.get(name)
        if value is None:
            return None
        return self._member(name, value, rule, choices)

    def required_choice(self, name: str, rule: ChoiceRule, choices: type[Choice]) -> Choice | None:
        """One of the rule's values, which must be there (None only alongside a problem)."""
        if name not in self._data:
            self.problem(name, "Field required")
            return None
        return self._member(name, self._data[name], rule, choices)

    def choice_or(self, name: str, rule: ChoiceRule, choices: type[Choice]) -> Choice:
        """One of the rule's values, its default when absent; null is no value of it."""
        default = choices(rule["default"])
        if name not in self._data:
            return default
        return self._member(name, self._data[name], rule, choices) or default

    def _member(self, name: str, value: object, rule: ChoiceRule, choices: type[Choice]) -> Choice | None:
        if isinstance(value, str) and value in rule["enum"]:
            return choices(value)
        self.problem(name, "Input should be " + " or ".join(f"'{choice}'" for choice in rule["enum"]))
        return None

    def whole_number(self, name: str, rule: IntegerRule, *, digits: int, unit: str | None = None) -> int:
        """A whole number (a JSON integer, or a query's ASCII digits, at most `digits` of them after any
        leading zeros) within the rule's bounds, its default when absent; a value that is no whole number
        at all is named as such, in `unit`s."""
        default = rule["default"]
        value = self._data.get(name)
        if value is None and name not in self._data:
            return default
        if isinstance(value, str):
            if not (value.isascii() and value.isdigit() and len(value.lstrip("0")) <= digits):
                lowest, highest = rule.get("minimum"), rule.get("maximum")
                counted = f" of {unit}" if unit else ""
                self.problem(name, f"Value error, {name} must be a whole number{counted} from {lowest} to {highest}")
                return default
            number = int(value)
            self._within(name, number, rule)
            return number
        found = self._integer(name, value, rule)
        return default if found is None else found

    def strict_int(self, name: str, rule: IntegerRule) -> int | None:
        """A JSON integer (never a float, string or boolean) within the rule's bounds; absent or null: None."""
        value = self._data.get(name)
        if value is None:
            return None
        return self._integer(name, value, rule)

    def strict_int_or(self, name: str, rule: IntegerRule) -> int:
        """A JSON integer within the rule's bounds, its default when absent; null is no integer."""
        if name not in self._data:
            return rule["default"]
        found = self._integer(name, self._data[name], rule)
        return rule["default"] if found is None else found

    def _integer(self, name: str, value: object, rule: IntegerRule) -> int | None:
        if isinstance(value, LongNumber):
            self.problem(name, value.problem)
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(name, "Input should be a valid integer")
            return None
        self._within(name, value, rule)
        return value

    def _within(self, name: str, value: float, rule: IntegerRule | NumberRule) -> bool:
        lowest, highest = rule.get("minimum"), rule.get("maximum")
        if lowest is not None and value < lowest:
            self.problem(name, f"Input should be greater than or equal to {lowest}")
            return False
        if highest is not None and value > highest:
            self.problem(name, f"Input should be less than or equal to {highest}")
            return False
        return True

    def amount(self, name: str, rule: NumberRule) -> float | None:
        """A JSON number within the rule's bounds (an integer taken as its float; never a string, a boolean or
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
        # compared before float(): a 400-digit integer has no float
        return float(value) if self._within(name, value, rule) else None

    def boolean_or(self, name: str, rule: BooleanRule) -> bool:
        """A JSON `true` or `false` (never a string or a number), its default when absent; null is no boolean."""
        default = rule.get("default", False)
        if name not in self._data:
            return default
        value = self._data[name]
        if isinstance(value, bool):
            return value
        self.problem(name, "Input should be a valid boolean")
        return default

    def flag(self, name: str, rule: ChoiceRule) -> bool:
        """A query's `true` or `false` (or a JSON boolean), the rule's values; its default when absent."""
        default = rule["default"] == "true"
        value = self._data.get(name)
        if value is None and name not in self._data:
            return default
        if isinstance(value, bool):
            return value
        if value in rule["enum"]:
            return value == "true"
        self.problem(name, f"Value error, {name} must be true or false")
        return default

    def text_map(self, name: str, rule: TextMapRule, *, mismatch: str | None = None) -> dict[str, str]:
        """A JSON object of strings to strings: at most the rule's entries, keys matching its key pattern, each
        value by the rule's value rule (`mismatch` words a value its pattern refuses); `{}` when absent."""
        value = self._data.get(name, {})
        if not isinstance(value, dict):
            self.problem(name, "Input should be a valid dictionary")
            return {}
        most = rule.get("max_properties")
        if most is not None and len(value) > most:
            self.problem(name, f"Dictionary should have at most {most} items after validation, not {len(value)}")
            return {}
        found: dict[str, str] = {}
        for key, item in value.items():
            problem = text_problem(item, rule["value"], mismatch) if is_text(item) else _NOT_A_STRING
            if problem is None:
                found[key] = item
            else:
                self.problem(f"{name}.{_shown(key)}", problem)
        key_pattern = rule.get("key_pattern")
        if key_pattern is not None:
            bad = sorted(key for key in value if not (is_text(key) and re.fullmatch(key_pattern, key)))
            if bad:
                shown = ", ".join(_shown(key) for key in bad[:5])
                self.problem(name, f"Value error, {name} keys must match {key_pattern}: {shown}")
        return found

    def text_list(self, name: str, rule: TextListRule) -> tuple[str, ...] | None:
        """A list of strings, each by the rule's item rule, at most `max_items`, distinct when the rule says so
        (absent or null: None, a problem when the rule requires it); each bad item is named `<name>.<index>`."""
        value = self._data.get(name)
        if value is None:
            if rule["required"]:
                self.problem(name, "Field required")
            return None
        if not isinstance(value, list):
            self.problem(name, "Input should be a valid list")
            return None
        most, least = rule.get("max_items"), rule.get("min_items")
        if most is not None and len(value) > most:
            self.problem(name, f"List should have at most {most} items after validation, not {len(value)}")
            return None
        if least is not None and len(value) < least:
            self.problem(name, f"List should have at least {least} items after validation, not {len(value)}")
            return None
        found: list[str] = []
        for index, item in enumerate(value):
            problem = text_problem(item, rule["items"]) if is_text(item) else _NOT_A_STRING
            if problem is None and rule["unique"] and item in found:
                problem = f"Value error, {item} is listed twice"
            if problem is not None:
                self.problem(f"{name}.{index}", problem)
            else:
                found.append(item)
        return tuple(found)

    def check(self, what: str) -> None:
        """Raise InvalidRequest naming every problem (unknown fields last), if there is any."""
        for name in self._extra:
            self.problem(_shown(name), "Extra inputs are not permitted")
        if self.problems:
            raise invalid_input(what, self.problems)


def text_problem(value: str, rule: TextRule, mismatch: str | None = None, *, check_pattern: bool = True) -> str | None:
    """What is wrong with a string by `rule` (None: nothing). Its pattern is compiled on first use (`re` keeps
    it), so that a function's init compiles none it never uses."""
    longest, shortest, pattern = rule.get("max_length"), rule.get("min_length"), rule.get("pattern")
    if longest is not None and len(value) > longest:
        return f"String should have at most {longest} characters"
    if shortest is not None and len(value) < shortest:
        return f"String should have at least {shortest} characters"
    if check_pattern and pattern is not None and not re.fullmatch(pattern, value):
        return mismatch or f"String should match pattern '^{pattern}$'"
    if value in rule.get("excluded", ()):
        return f"Value error, {value} is a name the service keeps for itself; choose another"
    return None


def _shown(text: str) -> str:
    """`text` for a message: what UTF-8 cannot carry escaped (a lone surrogate would break the answer)."""
    return text.encode("utf-8", "backslashreplace").decode()


def fields_of(data: object, what: str, allowed: Container[str]) -> Fields:
    """A JSON object's (or a query's) fields, `allowed` their names (a table of rules); InvalidRequest when
    `data` is no object."""
    if not isinstance(data, Mapping):
        raise InvalidRequest(f"{what} must be a JSON object")
    return Fields(data, allowed)
