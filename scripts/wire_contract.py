#!/usr/bin/env python3
"""`make contract`: openapi.yaml → layers/scheduler/scheduler/wire.py, the wire contract as plain Python data.

openapi.yaml is the one source of the HTTP contract. This reads from it every rule of every request (each
JSON body's properties, each operation's query parameters, the request headers) and the Lease's shape and
enums, and writes them out as literals, so that the functions validate by openapi.yaml's own rules without
parsing YAML at cold start (scheduler/inputs.py applies them). tests/unit/test_wire_contract.py makes the same
contract in memory and fails, naming the field, where it and the checked-in module differ.

What the validation cannot apply is refused here rather than left out: a keyword it does not know (extend this
and scheduler/inputs.py together), a format other than `date` and `date-time`, a body that takes unknown
properties, and a pattern Python would read otherwise than JSON Schema does (one not anchored `^…$`, with an
alternative at its top level, or with `\\d`, `\\w`, `\\s` or `\\b`, which are Unicode-wide in Python).

    .venv/bin/python scripts/wire_contract.py           # (re)writes the module
    .venv/bin/python scripts/wire_contract.py --check   # exit 1, naming each difference, when it is stale
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import yaml

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "openapi.yaml"
TARGET = REPO / "layers" / "scheduler" / "scheduler" / "wire.py"
TARGET_NAME = "scheduler/wire.py"
RUN = ": run `make contract`"
LINE_LENGTH = 120  # pyproject.toml's; the module is written as `ruff format` leaves it
HTTP_METHODS = ("get", "put", "post", "delete", "patch")

# Words for people, not rules.
DOCUMENTATION = frozenset({"description", "examples", "example", "title", "summary"})
# The formats the code checks beyond the pattern: a real day (request_models.py), an RFC 3339 instant (api/queries.py).
FORMATS = frozenset({"date", "date-time"})
# Each rule key as openapi.yaml spells it, for messages.
KEYWORDS = {
    "required": "required",
    "nullable": "null",
    "default": "default",
    "enum": "enum",
    "minimum": "minimum",
    "maximum": "maximum",
    "min_length": "minLength",
    "max_length": "maxLength",
    "pattern": "pattern",
    "format": "format",
    "max_properties": "maxProperties",
    "key_pattern": "propertyNames pattern",
    "value": "additionalProperties",
    "type": "type",
}


class ContractError(Exception):
    """openapi.yaml says something the validation cannot apply as it stands."""


class Constant(NamedTuple):
    """One constant of the module: a table of rules (field → rule) or a tuple of names."""

    name: str
    value: Any
    comment: str  # the line above it
    owner: str  # what openapi.yaml calls its source: "LeaseRequest", "listLeases", "Lease", "LeaseStatus"
    noun: str  # what each entry is: "property", "query parameter", "header", "value"
    typed: str | None = None  # the TypedDict of a table

    def entry(self, field: str) -> str:
        if self.noun == "property":
            return f"{self.owner}.{field}"
        return f"{self.owner} {self.noun} {field}"


# --- reading openapi.yaml ---------------------------------------------------------------------------


def load(path: Path = SPEC) -> dict[str, Any]:
    spec = yaml.safe_load(path.read_text())
    if not isinstance(spec, dict):
        raise ContractError(f"{path.name} is no OpenAPI document")
    return spec


def _resolve(spec: dict[str, Any], node: Any) -> Any:
    """`node` with its local `$ref` followed (keys beside the `$ref` win, as OpenAPI 3.1 reads them)."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node


def _types(schema: dict[str, Any], where: str) -> tuple[str, bool]:
    """(the one type besides null, whether null is allowed)."""
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared]
    kinds = [name for name in names if name != "null"]
    if len(kinds) != 1 or kinds[0] is None:
        raise ContractError(f"openapi.yaml {where} needs one `type` (besides null) for the validation to apply")
    return kinds[0], "null" in names


def pattern_of(pattern: str, where: str) -> str:
    """A JSON Schema pattern as Python's `re.fullmatch` reads it the same way: without its anchors."""
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        raise ContractError(
            f"openapi.yaml {where} pattern {pattern!r} must be anchored (^…$): the validation matches whole strings"
        )
    inner = pattern[1:-1]
    depth, in_class, escaped = 0, False, False
    for char in inner:
        if escaped:
            if char in "dDwWsSbB":
                raise ContractError(
                    f"openapi.yaml {where} pattern {pattern!r} uses \\{char}, which takes any script's characters in "
                    "Python: write the ASCII range ([0-9], [A-Za-z0-9_], [ \\t])"
                )
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            raise ContractError(f"openapi.yaml {where} pattern {pattern!r}: group a top-level alternative, ^(?:a|b)$")
        elif char in "^$":
            raise ContractError(f"openapi.yaml {where} pattern {pattern!r} has an anchor inside it")
    try:
        re.compile(inner)
    except re.error as error:
        raise ContractError(f"openapi.yaml {where} pattern {pattern!r} is no Python pattern: {error}") from error
    return inner


def _refuse_unknown(schema: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(schema) - allowed - DOCUMENTATION - {"type"})
    if unknown:
        raise ContractError(
            f"openapi.yaml {where} says {', '.join(f'`{key}`' for key in unknown)}, which the validation does not "
            "apply: extend scripts/wire_contract.py and scheduler/inputs.py together"
        )


def _number(value: Any, kind: str, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ContractError(f"openapi.yaml {where}: {value!r} is no number")
    if kind == "integer":
        if not float(value).is_integer():
            raise ContractError(f"openapi.yaml {where}: {value!r} is no integer")
        return int(value)
    return float(value)  # so that a message writes the bound as the number it is (10000.0)


def rule_of(spec: dict[str, Any], node: Any, where: str, *, required: bool) -> dict[str, Any]:
    """One field's rule: its type, whether it must be there and may be null, then what openapi.yaml bounds."""
    schema = _resolve(spec, node)
    kind, nullable = _types(schema, where)
    rule: dict[str, Any] = {"type": kind, "required": required, "nullable": nullable}
    if "enum" in schema:
        _refuse_unknown(schema, {"enum", "default"}, where)
        if kind != "string" or not all(isinstance(value, str) for value in schema["enum"]):
            raise ContractError(f"openapi.yaml {where}: the validation takes string enums only")
        rule["enum"] = tuple(schema["enum"])
        if "default" in schema:
            rule["default"] = schema["default"]
        return rule
    if kind == "string":
        _refuse_unknown(schema, {"minLength", "maxLength", "pattern", "format", "default", "not"}, where)
        if "not" in schema:
            excluded = _resolve(spec, schema["not"])
            _refuse_unknown(excluded, {"enum"}, f"{where} not")
            if not excluded.get("enum") or not all(isinstance(value, str) for value in excluded["enum"]):
                raise ContractError(f"openapi.yaml {where}: `not` takes a list of strings the value may not be")
            rule["excluded"] = tuple(excluded["enum"])
        for keyword, key in (("default", "default"), ("minLength", "min_length"), ("maxLength", "max_length")):
            if keyword in schema:
                rule[key] = schema[keyword]
        if "pattern" in schema:
            rule["pattern"] = pattern_of(schema["pattern"], where)
        if "format" in schema:
            if schema["format"] not in FORMATS:
                raise ContractError(f"openapi.yaml {where}: format {schema['format']!r} is none the validation checks")
            rule["format"] = schema["format"]
        return rule
    if kind == "boolean":
        _refuse_unknown(schema, {"default"}, where)
        if "default" in schema:
            if not isinstance(schema["default"], bool):
                raise ContractError(f"openapi.yaml {where} default: {schema['default']!r} is no boolean")
            rule["default"] = schema["default"]
        return rule
    if kind in ("integer", "number"):
        _refuse_unknown(schema, {"minimum", "maximum", "default"}, where)
        for keyword in ("default", "minimum", "maximum"):
            if keyword in schema:
                rule[keyword] = _number(schema[keyword], kind, f"{where} {keyword}")
        return rule
    if kind == "object":
        _refuse_unknown(schema, {"maxProperties", "propertyNames", "additionalProperties"}, where)
        if "maxProperties" in schema:
            rule["max_properties"] = schema["maxProperties"]
        names = _resolve(spec, schema.get("propertyNames", {}))
        _refuse_unknown(names, {"pattern"}, f"{where} propertyNames")
        if "pattern" in names:
            rule["key_pattern"] = pattern_of(names["pattern"], f"{where} propertyNames")
        value = rule_of(spec, schema.get("additionalProperties", {}), f"{where} values", required=False)
        if value["type"] != "string" or "enum" in value or value["nullable"]:
            raise ContractError(f"openapi.yaml {where}: the validation takes objects of strings only")
        rule["value"] = value
        return rule
    if kind == "array":
        _refuse_unknown(schema, {"items", "maxItems", "minItems", "uniqueItems"}, where)
        for keyword, key in (("maxItems", "max_items"), ("minItems", "min_items")):
            if keyword in schema:
                rule[key] = schema[keyword]
        rule["unique"] = bool(schema.get("uniqueItems", False))
        items = rule_of(spec, schema.get("items", {}), f"{where} items", required=False)
        if items["type"] != "string" or "enum" in items or items["nullable"]:
            raise ContractError(f"openapi.yaml {where}: the validation takes lists of strings only")
        rule["items"] = items
        return rule
    raise ContractError(f"openapi.yaml {where} is a {kind}, which the validation does not take")


# --- the constants ----------------------------------------------------------------------------------


def _upper(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).replace("-", "_").upper()


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_-]", _upper(name).lower()))


def _operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], list[dict[str, Any]]]]:
    """(method, path, operation, its parameters resolved) in the document's order."""
    for path, item in spec["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                operation = item[method]
                parameters = [_resolve(spec, p) for p in item.get("parameters", []) + operation.get("parameters", [])]
                yield method.upper(), path, operation, parameters


def _body(spec: dict[str, Any], method: str, path: str, operation: dict[str, Any]) -> Constant | None:
    body = operation.get("requestBody")
    if body is None:
        return None
    node = _resolve(spec, body)["content"]["application/json"]["schema"]
    if "$ref" not in node:
        raise ContractError(f"openapi.yaml {method} {path}: name the body's schema in components/schemas")
    name = node["$ref"].rsplit("/", 1)[-1]
    schema = _resolve(spec, node)
    if schema.get("additionalProperties") is not False:
        raise ContractError(
            f"openapi.yaml {name} must say additionalProperties: false: the validation refuses the rest"
        )
    _refuse_unknown(schema, {"additionalProperties", "properties", "required"}, name)
    required = set(schema.get("required", []))
    rules = {
        field: rule_of(spec, prop, f"{name}.{field}", required=field in required)
        for field, prop in schema["properties"].items()
    }
    return Constant(
        _upper(name), rules, f"{method} {path}: the JSON body, schema {name}", name, "property", f"{name}Rules"
    )


def requests(spec: dict[str, Any]) -> list[Constant]:
    """The rules of every request: each body, each operation's query parameters, the headers."""
    bodies: dict[str, Constant] = {}
    queries: list[Constant] = []
    headers: dict[str, dict[str, Any]] = {}
    for method, path, operation, parameters in _operations(spec):
        body = _body(spec, method, path, operation)
        if body is not None:
            bodies.setdefault(body.name, body)
        op = operation["operationId"]
        query: dict[str, dict[str, Any]] = {}
        for parameter in parameters:
            name, where = parameter["name"], parameter["in"]
            required = bool(parameter.get("required", False))
            if where == "query":
                query[name] = rule_of(spec, parameter["schema"], f"{op} query parameter {name}", required=required)
            elif where == "header":
                # a header is optional on some routes only: the rule is its value's, its presence the route's
                rule = rule_of(spec, parameter["schema"], f"header {name}", required=False)
                if headers.setdefault(name, rule) != rule:
                    raise ContractError(f"openapi.yaml: header {name} has two different schemas")
        if query:
            comment = f"{method} {path}: the query parameters (operation {op}); no other is taken"
            queries.append(
                Constant(f"{_upper(op)}_QUERY", query, comment, op, "query parameter", f"{_camel(op)}QueryRules")
            )
    header = Constant(
        "HEADERS", headers, "The request headers' values, by name", "the request", "header", "HeaderRules"
    )
    return [*bodies.values(), *queries, header]


def _enum(spec: dict[str, Any], name: str) -> tuple[str, ...]:
    schema = _resolve(spec, spec["components"]["schemas"][name])
    return tuple(schema["enum"])


def _nullable(spec: dict[str, Any], node: Any) -> bool:
    schema = _resolve(spec, node)
    branches = [_resolve(spec, branch) for branch in schema.get("oneOf", schema.get("anyOf", []))] or [schema]
    for branch in branches:
        declared = branch.get("type")
        if declared == "null" or (isinstance(declared, list) and "null" in declared):
            return True
    return False


def responses(spec: dict[str, Any]) -> list[Constant]:
    """The Lease's shape and the enums every side shares."""
    lease = _resolve(spec, spec["components"]["schemas"]["Lease"])
    properties = lease["properties"]
    live = [
        branch["properties"]["status"]["enum"]
        for branch in spec["components"]["schemas"]["LiveLease"]["allOf"]
        if "enum" in branch.get("properties", {}).get("status", {})
    ]
    if len(live) != 1:
        raise ContractError("openapi.yaml LiveLease must narrow `status` to one enum")
    worker_state = _resolve(spec, properties["worker_state"])
    return [
        Constant("LEASE_FIELDS", tuple(properties), "Lease: its properties, in order", "Lease", "property"),
        Constant(
            "LEASE_REQUIRED",
            tuple(lease["required"]),
            "Lease: the properties always sent",
            "Lease",
            "required property",
        ),
        Constant(
            "LEASE_NULLABLE",
            tuple(name for name, prop in properties.items() if _nullable(spec, prop)),
            "Lease: the properties that may be null",
            "Lease",
            "nullable property",
        ),
        Constant("LEASE_STATUSES", _enum(spec, "LeaseStatus"), "LeaseStatus", "LeaseStatus", "value"),
        Constant("LIVE_LEASE_STATUSES", tuple(live[0]), "LiveLease: the statuses listed", "LiveLease status", "value"),
        Constant("WORKER_STATES", tuple(worker_state["enum"]), "Lease.worker_state", "Lease.worker_state", "value"),
        Constant("WORKER_KINDS", _enum(spec, "WorkerKind"), "WorkerKind", "WorkerKind", "value"),
        Constant("GPU_CLASSES", _enum(spec, "GpuClass"), "GpuClass", "GpuClass", "value"),
    ]


def contract(spec: dict[str, Any]) -> list[Constant]:
    """Every constant of the module, in its order."""
    return [*requests(spec), *responses(spec)]


# --- writing the module -----------------------------------------------------------------------------

PREAMBLE = '''\
"""The wire contract: generated from openapi.yaml by scripts/wire_contract.py (`make contract`); do not edit.

Every rule of every request (each JSON body's properties, each operation's query parameters, the request headers)
and the Lease's shape and enums, as plain data, so that the functions validate by openapi.yaml's own rules without
parsing YAML at cold start: scheduler/inputs.py applies them. A rule holds what openapi.yaml states and nothing
else; a pattern matches the whole string (`re.fullmatch`: openapi.yaml's anchors are left out); the bounds of a
`number` are floats. tests/unit/test_wire_contract.py fails, naming the field, when this and openapi.yaml differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from typing import Literal, NotRequired, TypedDict

    class TextRule(TypedDict):
        type: Literal["string"]
        required: bool
        nullable: bool
        default: NotRequired[str]
        min_length: NotRequired[int]
        max_length: NotRequired[int]
        pattern: NotRequired[str]
        format: NotRequired[Literal["date", "date-time"]]
        excluded: NotRequired[tuple[str, ...]]

    class ChoiceRule(TypedDict):
        type: Literal["string"]
        required: bool
        nullable: bool
        enum: tuple[str, ...]
        default: NotRequired[str]

    class IntegerRule(TypedDict):
        type: Literal["integer"]
        required: bool
        nullable: bool
        default: NotRequired[int]
        minimum: NotRequired[int]
        maximum: NotRequired[int]

    class NumberRule(TypedDict):
        type: Literal["number"]
        required: bool
        nullable: bool
        default: NotRequired[float]
        minimum: NotRequired[float]
        maximum: NotRequired[float]

    class BooleanRule(TypedDict):
        type: Literal["boolean"]
        required: bool
        nullable: bool
        default: NotRequired[bool]

    class TextMapRule(TypedDict):
        type: Literal["object"]
        required: bool
        nullable: bool
        max_properties: NotRequired[int]
        key_pattern: NotRequired[str]
        value: TextRule

    class TextListRule(TypedDict):
        type: Literal["array"]
        required: bool
        nullable: bool
        unique: bool
        max_items: NotRequired[int]
        min_items: NotRequired[int]
        items: TextRule

'''


RULE_TYPES = {
    "string": "TextRule",
    "integer": "IntegerRule",
    "number": "NumberRule",
    "boolean": "BooleanRule",
    "object": "TextMapRule",
    "array": "TextListRule",
}


def _rule_type(rule: dict[str, Any]) -> str:
    return "ChoiceRule" if "enum" in rule else RULE_TYPES[rule["type"]]


def _literal(value: Any, indent: int, prefix: str, suffix: str) -> list[str]:
    """`value` as source lines, starting `prefix` at `indent` and ending in `suffix`, laid out as ruff formats it:
    on one line where it fits, else one entry per line with a trailing comma."""
    pad = " " * indent
    inline = _inline(value)
    if inline is not None and len(pad) + len(prefix) + len(inline) + len(suffix) <= LINE_LENGTH:
        return [f"{pad}{prefix}{inline}{suffix}"]
    if isinstance(value, dict):
        lines = [f"{pad}{prefix}{{"]
        for key, item in value.items():
            lines += _literal(item, indent + 4, f"{json.dumps(key)}: ", ",")
        return [*lines, f"{pad}}}{suffix}"]
    if isinstance(value, tuple):
        lines = [f"{pad}{prefix}("]
        for item in value:
            lines += _literal(item, indent + 4, "", ",")
        return [*lines, f"{pad}){suffix}"]
    # An atom no line can hold (a long pattern): ruff leaves it whole, and so does the reader.
    return [f"{pad}{prefix}{inline}{suffix}  # noqa: E501"]


def _inline(value: Any) -> str | None:
    if isinstance(value, str):
        return json.dumps(value)  # its escapes are Python's too; double quotes, as ruff writes them
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple):
        items = [item for item in map(_inline, value) if item is not None]
        if len(items) < len(value):
            return None
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return None  # a dict goes one entry per line: a rule reads best that way


def render(constants: list[Constant]) -> str:
    lines = [PREAMBLE.rstrip("\n")]
    for table in (constant for constant in constants if constant.typed):
        lines += ["", *_typed_dict(table.typed or "", {field: _rule_type(rule) for field, rule in table.value.items()})]
    lines.append("")
    for constant in constants:
        lines += ["", f"# {constant.comment}"]
        annotation = f"Final[{constant.typed}]" if constant.typed else "Final"
        lines += _literal(constant.value, 0, f"{constant.name}: {annotation} = ", "")
    return "\n".join(lines) + "\n"


def _typed_dict(name: str, fields: dict[str, str]) -> list[str]:
    """A table's TypedDict inside `if TYPE_CHECKING:`, as ruff wants it: a class, unless a key is no identifier."""
    if all(field.isidentifier() for field in fields):
        return [f"    class {name}(TypedDict):", *(f"        {field}: {kind}" for field, kind in fields.items())]
    entries = ", ".join(f"{json.dumps(field)}: {kind}" for field, kind in fields.items())
    one_line = f'    {name} = TypedDict("{name}", {{{entries}}})'
    if len(one_line) <= LINE_LENGTH:
        return [one_line]
    lines = [f"    {name} = TypedDict(", f'        "{name}",', "        {"]
    lines += [f"            {json.dumps(field)}: {kind}," for field, kind in fields.items()]
    return [*lines, "        },", "    )"]


# --- comparing --------------------------------------------------------------------------------------


def _shown(key: str, value: Any) -> str:
    if key == "pattern" or key == "key_pattern":
        return f"'^{value}$'"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _rule_differences(where: str, expected: dict[str, Any], actual: Any) -> Iterator[str]:
    if not isinstance(actual, dict):
        yield f"{TARGET_NAME} has no rule for openapi.yaml {where}{RUN}"
        return
    for key in dict.fromkeys([*expected, *actual]):
        keyword = KEYWORDS.get(key, key)
        if key == "value" and isinstance(expected.get(key), dict):
            yield from _rule_differences(f"{where} values", expected[key], actual.get(key))
        elif key not in actual:
            yield f"openapi.yaml {where} {keyword} is {_shown(key, expected[key])} but {TARGET_NAME} has none{RUN}"
        elif key not in expected:
            yield f"openapi.yaml {where} has no {keyword} but {TARGET_NAME} says {_shown(key, actual[key])}{RUN}"
        elif expected[key] != actual[key] or type(expected[key]) is not type(actual[key]):
            yield (
                f"openapi.yaml {where} {keyword} is {_shown(key, expected[key])} but {TARGET_NAME} says "
                f"{_shown(key, actual[key])}{RUN}"
            )


def _names_differences(constant: Constant, actual: tuple[str, ...]) -> Iterator[str]:
    expected: tuple[str, ...] = constant.value
    for name in expected:
        if name not in actual:
            yield f"openapi.yaml {constant.owner} has a {constant.noun} `{name}` that {TARGET_NAME} lacks{RUN}"
    for name in actual:
        if name not in expected:
            yield f"{TARGET_NAME} has {constant.owner} {constant.noun} `{name}`, which openapi.yaml does not{RUN}"
    if set(expected) == set(actual) and tuple(expected) != tuple(actual):
        yield f"openapi.yaml orders {constant.owner} {', '.join(expected)}; {TARGET_NAME} otherwise{RUN}"


def differences(constants: list[Constant], module: ModuleType) -> list[str]:
    """Each way `module` (the checked-in wire.py) differs from `constants` (openapi.yaml's), named."""
    found: list[str] = []
    known = {constant.name for constant in constants}
    for constant in constants:
        actual = getattr(module, constant.name, None)
        if actual is None:
            found.append(f"{TARGET_NAME} lacks {constant.name} ({constant.comment}){RUN}")
        elif isinstance(constant.value, dict):
            for field, rule in constant.value.items():
                if field not in actual:
                    found.append(
                        f"openapi.yaml {constant.owner} has a {constant.noun} `{field}` that {TARGET_NAME} lacks{RUN}"
                    )
                else:
                    found += _rule_differences(constant.entry(field), rule, actual[field])
            for field in actual:
                if field not in constant.value:
                    found.append(f"{TARGET_NAME} has {constant.entry(field)}, which openapi.yaml does not{RUN}")
        else:
            found += _names_differences(constant, tuple(actual))
    for name, value in vars(module).items():
        if name.isupper() and isinstance(value, dict | tuple) and name not in known:
            found.append(f"{TARGET_NAME} has {name}, which openapi.yaml no longer gives{RUN}")
    return found


def _checked_in() -> ModuleType:
    """The module as checked in, loaded from its file (not from whatever `scheduler` is on sys.path)."""
    spec = importlib.util.spec_from_file_location("checked_in_wire", TARGET)
    assert spec is not None and spec.loader is not None  # noqa: S101 - a .py file always has a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only say whether the module is what openapi.yaml makes")
    args = parser.parse_args(argv)
    try:
        constants = contract(load())
    except ContractError as error:
        print(f"wire-contract: {error}", file=sys.stderr)
        return 1
    text = render(constants)
    current = TARGET.read_text() if TARGET.exists() else ""
    if args.check:
        if current == text:
            return 0
        found = differences(constants, _checked_in()) if current else []
        for line in found or [f"{TARGET_NAME} is not as `make contract` writes it{RUN}"]:
            print(f"wire-contract: {line}", file=sys.stderr)
        return 1
    if current != text:
        TARGET.write_text(text)
        print(f"wire-contract: wrote {TARGET.relative_to(REPO)}")
    else:
        print(f"wire-contract: {TARGET.relative_to(REPO)} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
