"""Reads `template.yaml` so the local stack has no second route table, table schema or mapping to drift."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """A YAML loader that keeps CloudFormation short tags (`!Ref X` → `{"Ref": "X"}`)."""


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = suffix if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _construct_tag)


def load_yaml(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as plain data, intrinsic functions kept as `{"Ref": ...}` / `{"Fn::...": ...}`."""
    with path.open() as handle:
        data = yaml.load(handle, Loader=_CfnLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a template")
    return data


@dataclass(frozen=True)
class FunctionSpec:
    """One AWS::Serverless::Function as the local stack runs it."""

    logical_id: str
    code_dir: Path
    module: str
    handler: str
    timeout: int
    memory_mb: int
    uses_layer: bool
    environment: dict[str, str]


@dataclass(frozen=True)
class RouteSpec:
    """One HttpApi route."""

    method: str
    path: str
    function: str
    authorized: bool

    @property
    def route_key(self) -> str:
        """`METHOD /path` as API Gateway names the route."""
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """Path parameters if this route serves the request, else None."""
        if method != self.method:
            return None
        pattern = "^" + re.sub(r"\\\{([A-Za-z0-9_]+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)) + "$"
        found = re.match(pattern, path)
        return found.groupdict() if found else None


@dataclass(frozen=True)
class AuthorizerSpec:
    """The HttpApi's Lambda REQUEST authorizer."""

    function: str
    identity_headers: tuple[str, ...]
    ttl_seconds: int
    simple_responses: bool


@dataclass(frozen=True)
class StreamMappingSpec:
    """A DynamoDB event source mapping."""

    function: str
    table: str
    batch_size: int
    max_retries: int
    bisect_on_error: bool
    report_item_failures: bool
    filter_patterns: tuple[dict[str, Any], ...]
    starting_position: str


@dataclass(frozen=True)
class ScheduleSpec:
    """A Schedule event on a function."""

    function: str
    expression: str | dict[str, Any]


@dataclass
class SamTemplate:
    """The parts of the SAM template the local stack reproduces."""

    raw: dict[str, Any]
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    routes: list[RouteSpec] = field(default_factory=list)
    authorizer: AuthorizerSpec | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    stream_mappings: list[StreamMappingSpec] = field(default_factory=list)
    schedules: list[ScheduleSpec] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path = TEMPLATE) -> SamTemplate:
        """Parse the template at `path`."""
        raw = load_yaml(path)
        template = cls(raw=raw)
        globals_ = raw.get("Globals", {}).get("Function", {})
        resources: dict[str, dict[str, Any]] = raw.get("Resources", {})
        for logical_id, resource in resources.items():
            kind, props = resource.get("Type"), resource.get("Properties", {})
            if kind == "AWS::DynamoDB::Table":
                template.tables[logical_id] = props
            elif kind == "AWS::Serverless::HttpApi":
                template.authorizer = _authorizer(props)
            elif kind == "AWS::Serverless::Function":
                template._add_function(logical_id, props, globals_, path.parent)
        return template

    def _add_function(self, logical_id: str, props: dict[str, Any], globals_: dict[str, Any], root: Path) -> None:
        module, handler = str(props["Handler"]).rsplit(".", 1)
        environment = {
            **globals_.get("Environment", {}).get("Variables", {}),
            **props.get("Environment", {}).get("Variables", {}),
        }
        self.functions[logical_id] = FunctionSpec(
            logical_id=logical_id,
            code_dir=(root / props["CodeUri"]).resolve(),
            module=module,
            handler=handler,
            timeout=int(props.get("Timeout", globals_.get("Timeout", 3))),
            memory_mb=int(props.get("MemorySize", globals_.get("MemorySize", 128))),
            uses_layer=bool(props.get("Layers")),
            environment={key: str(value) for key, value in environment.items() if isinstance(value, str | int)},
        )
        for event in props.get("Events", {}).values():
            event_props = event.get("Properties", {})
            if event["Type"] == "HttpApi":
                auth = event_props.get("Auth", {})
                self.routes.append(
                    RouteSpec(
                        method=str(event_props["Method"]).upper(),
                        path=str(event_props["Path"]),
                        function=logical_id,
                        authorized=auth.get("Authorizer") != "NONE",
                    )
                )
            elif event["Type"] == "DynamoDB":
                stream = event_props["Stream"]
                table = stream["Fn::GetAtt"][0] if isinstance(stream, dict) else str(stream)
                self.stream_mappings.append(
                    StreamMappingSpec(
                        function=logical_id,
                        table=table,
                        batch_size=int(event_props.get("BatchSize", 100)),
                        max_retries=int(event_props.get("MaximumRetryAttempts", -1)),
                        bisect_on_error=bool(event_props.get("BisectBatchOnFunctionError", False)),
                        report_item_failures="ReportBatchItemFailures" in event_props.get("FunctionResponseTypes", []),
                        filter_patterns=tuple(
                            json.loads(item["Pattern"])
                            for item in event_props.get("FilterCriteria", {}).get("Filters", [])
                        ),
                        starting_position=str(event_props.get("StartingPosition", "TRIM_HORIZON")),
                    )
                )
            elif event["Type"] in ("Schedule", "ScheduleV2"):
                self.schedules.append(ScheduleSpec(function=logical_id, expression=event_props["Schedule"]))

    def route_for(self, method: str, path: str) -> tuple[RouteSpec, dict[str, str]] | None:
        """The route serving `method path`, with its path parameters."""
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return route, params
        return None


def _authorizer(props: dict[str, Any]) -> AuthorizerSpec | None:
    auth = props.get("Auth", {})
    name = auth.get("DefaultAuthorizer")
    if not name:
        return None
    spec = auth["Authorizers"][name]
    identity = spec.get("Identity", {})
    return AuthorizerSpec(
        function=spec["FunctionArn"]["Fn::GetAtt"][0],
        identity_headers=tuple(identity.get("Headers", [])),
        ttl_seconds=int(identity.get("ReauthorizeEvery", 300)),
        simple_responses=bool(spec.get("EnableSimpleResponses", False)),
    )
