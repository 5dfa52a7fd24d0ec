"""Every request is validated as openapi.yaml says, in both directions. For each field of each request's rules
(scheduler/wire.py, made from openapi.yaml) a probe sends what the rule admits at each bound, length, enum value,
requirement and default, and what it refuses just past them, breaking its pattern or its format: the first is
taken, the second refused naming the field. So a rule the validation ignores, or a limit it adds that openapi.yaml
does not state, fails here by name; the wording of each refusal is pinned by test_inputs.py and its neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from scheduler import wire
from scheduler.errors import InvalidRequest
from tests.unit.test_wire_contract import MODELS, as_sent

# What each request needs besides the field probed, to be taken.
BASES: dict[str, dict[str, object]] = {
    "LEASE_REQUEST": {"kind": "renderer"},
    "RELEASE_OWNER_LEASES_QUERY": {"owner_id": "a"},
    "CALLER_REQUEST": {"name": "svc", "owners": ["a"], "role": "service"},
    "ROTATE_REQUEST": {"grace_seconds": 0},
    "WEBHOOK_REQUEST": {"url": "https://hooks.example.com/in"},
}
# Rules applied past the model by a reader that says more, as the model's parse() explains.
ELSEWHERE = {("LIST_LEASES_QUERY", "next_token", "pattern"): "the paging token's decoder (tests/unit/test_store.py)"}
ABSENT = object()
# Strings a pattern may refuse; the first it does is sent.
UNLIKE = (" ", " a", "a ", "\x00", "lower", "1ST", "a\n", "é", "!", "2026-1-1")
# A value of each format that its pattern admits and that does not exist.
IMPOSSIBLE = {"date": "2026-02-30", "date-time": "2026-02-30T00:00:00Z"}


class Probe(NamedTuple):
    table: str
    field: str
    what: str
    value: object
    taken: bool

    def __str__(self) -> str:
        shown = "absent" if self.value is ABSENT else repr(self.value)
        return f"{self.table}.{self.field} {self.what} {shown[:24]} {'taken' if self.taken else 'refused'}"


def _admits(rule: Any, value: str) -> bool:
    return "pattern" not in rule or re.fullmatch(rule["pattern"], value) is not None


def _unlike(rule: Any) -> str:
    return next(candidate for candidate in UNLIKE if not _admits(rule, candidate))


def _string(table: str, field: str, rule: Any) -> Iterator[Probe]:
    longest = rule.get("max_length")
    if longest is not None:
        yield Probe(table, field, "maxLength", "a" * (longest + 1), False)
        if _admits(rule, "a" * longest):
            yield Probe(table, field, "maxLength", "a" * longest, True)
    if "pattern" in rule and (table, field, "pattern") not in ELSEWHERE:
        yield Probe(table, field, "pattern", _unlike(rule), False)
    if "format" in rule:
        yield Probe(table, field, f"format {rule['format']}", IMPOSSIBLE[rule["format"]], False)
    for excluded in rule.get("excluded", ()):
        yield Probe(table, field, "not enum", excluded, False)


def _number(table: str, field: str, rule: Any, as_sent: Any) -> Iterator[Probe]:
    if "minimum" in rule:
        lowest = rule["minimum"]
        yield Probe(table, field, "minimum", as_sent(lowest), True)
        yield Probe(table, field, "minimum", as_sent(lowest - 1 if rule["type"] == "integer" else lowest / 2), False)
    if "maximum" in rule:
        highest = rule["maximum"]
        yield Probe(table, field, "maximum", as_sent(highest), True)
        yield Probe(table, field, "maximum", as_sent(highest + 1 if rule["type"] == "integer" else highest * 2), False)


def _map(table: str, field: str, rule: Any) -> Iterator[Probe]:
    most = rule.get("max_properties")
    keys = [f"K{index}" for index in range((most or 0) + 1)]
    if most is not None and all(re.fullmatch(rule.get("key_pattern", ".*"), key) for key in keys):
        yield Probe(table, field, "maxProperties", dict.fromkeys(keys[:most], "v"), True)
        yield Probe(table, field, "maxProperties", dict.fromkeys(keys, "v"), False)
    if "key_pattern" in rule:
        yield Probe(table, field, "propertyNames pattern", {_unlike({"pattern": rule["key_pattern"]}): "v"}, False)
    for probe in _string(table, field, rule["value"]):
        yield probe._replace(what=f"values' {probe.what}", value={"K": probe.value})


def _list(table: str, field: str, rule: Any) -> Iterator[Probe]:
    items = rule["items"]
    most = rule.get("max_items")
    if most is not None:
        distinct = [f"a{index}" for index in range(most + 1)]
        if all(_admits(items, item) for item in distinct):
            yield Probe(table, field, "maxItems", distinct[:most], True)
            yield Probe(table, field, "maxItems", distinct, False)
    if rule["unique"]:
        yield Probe(table, field, "uniqueItems", ["a", "a"], False)
    for probe in _string(table, field, items):
        yield probe._replace(what=f"items' {probe.what}", value=[probe.value])


def probes() -> Iterator[Probe]:
    for table in MODELS:
        query = table.endswith("_QUERY")
        as_sent = str if query else (lambda value: value)
        for field, rule in getattr(wire, table).items():
            if "enum" in rule:
                yield from (Probe(table, field, "enum", value, True) for value in rule["enum"])
                yield Probe(table, field, "enum", "not-" + rule["enum"][0], False)
            elif rule["type"] == "string":
                yield from _string(table, field, rule)
            elif rule["type"] in ("integer", "number"):
                yield from _number(table, field, rule, as_sent)
            elif rule["type"] == "object":
                yield from _map(table, field, rule)
            elif rule["type"] == "array":
                yield from _list(table, field, rule)
            elif rule["type"] == "boolean":
                yield from (Probe(table, field, "boolean", value, True) for value in (True, False))
                yield from (Probe(table, field, "boolean", value, False) for value in ("true", 1))
            yield Probe(table, field, "required" if rule["required"] else "optional", ABSENT, not rule["required"])
            if not query:  # a query's values are strings: JSON's null is a body's
                yield Probe(table, field, "null", None, rule["nullable"])
        yield Probe(table, "unknown_field", "no other field", "x", False)


PROBES = list(probes())


def _sent(probe: Probe) -> dict[str, object]:
    data = dict(BASES.get(probe.table, {}))
    data.pop(probe.field, None)
    if probe.value is not ABSENT:
        data[probe.field] = probe.value
    return data


@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_each_request_takes_what_its_rules_admit_and_refuses_the_rest_by_name(probe: Probe) -> None:
    parse = MODELS[probe.table].parse
    if probe.taken:
        parse(_sent(probe))
        return
    with pytest.raises(InvalidRequest) as refused:
        parse(_sent(probe))
    named = [problem["field"] for problem in (refused.value.details or {}).get("problems", [])]  # type: ignore[attr-defined]
    assert any(name == probe.field or name.startswith(f"{probe.field}.") for name in named), named


@pytest.mark.parametrize(
    ("table", "field"),
    [(table, field) for table in MODELS for field, rule in getattr(wire, table).items() if "default" in rule],
)
def test_an_absent_field_reads_as_its_default(table: str, field: str) -> None:
    parsed = getattr(MODELS[table].parse(dict(BASES.get(table, {}))), field)
    assert as_sent(parsed, table) == getattr(wire, table)[field]["default"]


def test_the_probes_reach_every_kind_of_rule() -> None:
    kinds = {probe.what.split()[0] for probe in PROBES}
    assert {"enum", "maxLength", "pattern", "format", "minimum", "maximum", "required", "optional", "null"} <= kinds
    assert {"maxProperties", "propertyNames", "values'", "maxItems", "uniqueItems", "items'", "not"} <= kinds


def test_every_rule_applied_elsewhere_exists() -> None:
    for table, field, key in ELSEWHERE:
        assert key in getattr(wire, table)[field], f"{table}.{field} has no {key} any more: drop it from ELSEWHERE"
