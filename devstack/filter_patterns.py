"""Lambda event filtering (FilterCriteria patterns), which moto stores but does not apply.

Supports the pattern forms the template uses and their usual neighbours: lists of literal values,
`prefix`, `suffix`, `exists`, `anything-but` and `numeric`, nested to any depth.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


def matches_any(patterns: tuple[dict[str, Any], ...], record: dict[str, Any]) -> bool:
    """True when no patterns are set or at least one matches (filters are OR-ed)."""
    return not patterns or any(matches(pattern, record) for pattern in patterns)


def matches(pattern: dict[str, Any], data: Any) -> bool:
    """True when every key of `pattern` matches `data` (keys are AND-ed)."""
    if not isinstance(data, dict):
        return False
    for key, expected in pattern.items():
        value = data.get(key, _MISSING)
        if isinstance(expected, dict):
            if value is _MISSING or not matches(expected, value):
                return False
        elif isinstance(expected, list):
            if not any(_matches_rule(rule, value) for rule in expected):
                return False
        else:
            raise ValueError(f"pattern value for {key!r} must be a list or an object")
    return True


def _matches_rule(rule: Any, value: Any) -> bool:
    if isinstance(rule, dict):
        ((operator, operand),) = rule.items()
        if operator == "exists":
            return (value is not _MISSING) == bool(operand)
        if value is _MISSING:
            return False
        if operator == "prefix":
            return isinstance(value, str) and value.startswith(operand)
        if operator == "suffix":
            return isinstance(value, str) and value.endswith(operand)
        if operator == "anything-but":
            excluded = operand if isinstance(operand, list) else [operand]
            return value not in excluded
        if operator == "numeric":
            return _numeric(operand, value)
        raise ValueError(f"unsupported filter operator {operator!r}")
    if value is _MISSING:
        return False
    if isinstance(value, list):
        return rule in value
    return bool(value == rule)


def _numeric(conditions: list[Any], value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    checks = {
        "=": lambda a, b: a == b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    pairs = zip(conditions[::2], conditions[1::2], strict=True)
    return all(checks[operator](number, float(operand)) for operator, operand in pairs)
