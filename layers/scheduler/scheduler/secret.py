"""A secret setting's value, masked wherever it could be shown (a log line, a repr, an f-string)."""

from __future__ import annotations


class Secret:
    """A string that never shows itself: `repr`, `str`, `format` (f-strings, `%s`) and so every log line,
    JSON-rendered ones included, show a mask. Not a `str`, so no string operation hands the value on either:
    only `get_secret_value()` does."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        """The secret itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:  # settings compare by value
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
