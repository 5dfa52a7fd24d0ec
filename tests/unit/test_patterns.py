"""Every regular expression in the code that ships or serves (layers/, functions/, devstack/, the client) means
what it says: `\\d`, `\\w`, `\\s` and `\\b` are Unicode-wide in Python (`\\d` takes ٢ and ２, which `int()` then
reads and a date parser refuses), so they come with `re.ASCII` or are written as ranges (`[0-9]`); and `$` also
matches before a final newline (`"gpu-a\\n"`), so a pattern is matched whole with `fullmatch` instead.

Read from the source (every literal pattern handed to `re`, and every module-level string constant one of them
names), so a new pattern is checked the day it is written; and openapi.yaml's, as scheduler/wire.py holds them for
the validation (scripts/wire_contract.py refuses these classes there too).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler import wire

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("layers", "functions", "devstack", "client/src")
_RE_CALLS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}
_UNICODE_CLASSES = set("dDwWsSbB")
# Patterns that are right as they are, and why.
EXCEPTIONS: set[str] = set()


def _sources() -> Iterator[Path]:
    for root in ROOTS:
        yield from sorted((REPO / root).rglob("*.py"))


def _patterns(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, pattern, whether the call passes re.ASCII) for each pattern handed to `re`."""
    tree = ast.parse(path.read_text(), str(path))
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in _RE_CALLS
            and node.args
        ):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            pattern = first.value
        elif isinstance(first, ast.Name) and first.id in constants:
            pattern = constants[first.id]
        else:
            continue  # built at run time (e.g. from re.escape): checked where its parts are written
        names = {
            part.attr
            for part in ast.walk(node)
            if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "re"
        }
        yield node.lineno, pattern, bool(names & {"ASCII", "A"})


def _unicode_classes(pattern: str) -> list[str]:
    found, escaped = [], False
    for char in pattern:
        if escaped and char in _UNICODE_CLASSES:
            found.append("\\" + char)
        escaped = not escaped and char == "\\"
    return found


def _has_dollar(pattern: str) -> bool:
    escaped, in_class = False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "$" and not in_class:
            return True
    return False


def _wire_patterns() -> Iterator[tuple[str, str]]:
    """(where, pattern) for each pattern of openapi.yaml's request rules, as `re.fullmatch` is given it."""
    for name, table in vars(wire).items():
        if not (name.isupper() and isinstance(table, dict)):
            continue
        for field, rule in table.items():
            for key, holder in (("pattern", rule), ("key_pattern", rule), ("pattern", rule.get("value", {}))):
                if key in holder:
                    yield f"scheduler/wire.py {name}.{field} {key}", holder[key]


def _findings() -> list[str]:
    findings = []
    for where, pattern in _wire_patterns():
        if _unicode_classes(pattern):
            findings.append(f"{where}: {' '.join(_unicode_classes(pattern))} in {pattern!r}")
        if _has_dollar(pattern):
            findings.append(f"{where}: `$` in {pattern!r} (openapi.yaml's anchors are left out)")
    for path in _sources():
        name = path.relative_to(REPO).as_posix()
        if name in EXCEPTIONS:
            continue
        for line, pattern, ascii_flag in _patterns(path):
            classes = _unicode_classes(pattern)
            if classes and not ascii_flag:
                findings.append(f"{name}:{line}: {' '.join(classes)} without re.ASCII in {pattern!r}")
            if _has_dollar(pattern):
                findings.append(f"{name}:{line}: `$` (matches before a final newline; use fullmatch) in {pattern!r}")
    return findings


def test_the_scan_sees_the_patterns() -> None:
    seen = [pattern for path in _sources() for _, pattern, _ in _patterns(path)]
    assert any("[0-9]{4}-[0-9]{2}-[0-9]{2}" in pattern for pattern in seen)  # the usage query's day
    assert len(seen) >= 10
    assert ("scheduler/wire.py GET_USAGE_QUERY.since pattern", "[0-9]{4}-[0-9]{2}-[0-9]{2}") in set(_wire_patterns())


def test_no_pattern_takes_other_scripts_digits_or_a_trailing_newline() -> None:
    assert _findings() == []


@pytest.mark.parametrize(
    ("pattern", "classes", "dollar"),
    [(r"\d{4}", ["\\d"], False), (r"\\d", [], False), (r"[a-z]+$", [], True), (r"[$]\$", [], False)],
)
def test_the_scan_reads_escapes_and_classes(pattern: str, classes: list[str], dollar: bool) -> None:
    assert (_unicode_classes(pattern), _has_dollar(pattern)) == (classes, dollar)
