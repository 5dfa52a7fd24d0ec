"""Reads `template.yaml` so the local stack has no second route table, table schema or mapping to drift."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _SafeLoader  # libyaml: parses template.yaml ~10x faster
except ImportError:  # a PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "template.yaml"


class _CfnLoader(_SafeLoader):
    """A YAML loader that keeps CloudFormation short tags (`!Ref X` → `{"Ref": "X"}`)."""


def _construct_tag(loader: yaml.constructor.SafeConstructor, suffix: str, node: yaml.Node) -> dict[str, Any]:
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


def variable_of(parameter: str) -> str:
    """The variable that stands for a template parameter locally: `DockerHost` → DOCKER_HOST."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", parameter).upper()


def load_yaml(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as plain data, intrinsic functions kept as `{"Ref": ...}` / `{"Fn::...": ...}`."""
    with path.open() as handle:
        data = yaml.load(handle, Loader=_CfnLoader)  # noqa: S506 - SafeLoader subclass  # nosec B506
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
    variables: dict[str, Any]  # as the template sets them (intrinsics unresolved: see SamTemplate.environment_of)


@dataclass(frozen=True)
class RouteSpec:
    """One HttpApi route, and how API Gateway authorizes it: "NONE", "AWS_IAM" (SigV4) or a Lambda authorizer's
    name (the event's `Auth.Authorizer`, else the route's `security` in the api's DefinitionBody, its !If decided
    with the parameters, else the api's DefaultAuthorizer)."""

    method: str
    path: str
    function: str
    auth: str

    @property
    def authorized(self) -> bool:
        return self.auth != "NONE"

    @property
    def route_key(self) -> str:
        """`METHOD /path` as API Gateway names the route."""
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """Path parameters if this route serves the request, else None."""
        if method != self.method:
            return None
        pattern = re.sub(r"\\\{([A-Za-z0-9_]+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path))
        found = re.fullmatch(pattern, path)  # whole: `$` would also match before a final newline
        return found.groupdict() if found else None


@dataclass(frozen=True)
class AuthorizerSpec:
    """The HttpApi's Lambda REQUEST authorizer."""

    function: str
    identity_headers: tuple[str, ...]
    ttl_seconds: int
    simple_responses: bool


@dataclass(frozen=True)
class EdgeSpec:
    """What API Gateway itself does before any function runs: throttling and CORS."""

    burst_limit: int | None = None
    rate_limit: float | None = None
    cors_origins: tuple[str, ...] = ()
    cors_methods: tuple[str, ...] = ()
    cors_headers: tuple[str, ...] = ()
    cors_max_age: int = 0


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
class QueueMappingSpec:
    """An SQS event source mapping."""

    function: str
    queue: str  # the queue's logical id
    batch_size: int
    report_item_failures: bool
    max_concurrency: int


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
    authorizer: AuthorizerSpec | None = None  # the api's DefaultAuthorizer
    authorizers: dict[str, AuthorizerSpec] = field(default_factory=dict)  # every Lambda authorizer, by name
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    stream_mappings: list[StreamMappingSpec] = field(default_factory=list)
    queue_mappings: list[QueueMappingSpec] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # AWS::SQS::Queue properties, by logical id
    buses: dict[str, dict[str, Any]] = field(default_factory=dict)  # AWS::Events::EventBus properties, by logical id
    schedules: list[ScheduleSpec] = field(default_factory=list)
    table_variables: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    edge: EdgeSpec = field(default_factory=EdgeSpec)

    @classmethod
    def load(cls, path: Path = TEMPLATE) -> SamTemplate:
        """Parse the template at `path`."""
        raw = load_yaml(path)
        template = cls(raw=raw)
        globals_ = raw.get("Globals", {}).get("Function", {})
        template.parameters = {name: spec.get("Default") for name, spec in raw.get("Parameters", {}).items()}
        resources: dict[str, dict[str, Any]] = raw.get("Resources", {})
        for logical_id, resource in resources.items():
            kind, props = resource.get("Type"), resource.get("Properties", {})
            if kind == "AWS::DynamoDB::Table":
                template.tables[logical_id] = props
            elif kind == "AWS::SQS::Queue":
                template.queues[logical_id] = props
            elif kind == "AWS::Events::EventBus":
                template.buses[logical_id] = props
            elif kind == "AWS::Serverless::HttpApi":
                template._http_api_props = props
            elif kind == "AWS::Serverless::Function":
                template._add_function(logical_id, props, globals_, path.parent)
        if template._http_api_props is not None:
            template.edge = template._edge(template._http_api_props)
            template._add_auth(template._http_api_props)
        # The functions learn each table's name from a Globals variable (`LEASES_TABLE: !Ref LeasesTable`).
        for variable, value in globals_.get("Environment", {}).get("Variables", {}).items():
            if isinstance(value, dict) and value.get("Ref") in template.tables:
                template.table_variables[value["Ref"]] = variable
        return template

    _http_api_props: dict[str, Any] | None = None

    def parameter(self, name: str) -> Any:
        """A template parameter: the environment's `UPPER_SNAKE` variable if set, else its default."""
        value = os.environ.get(variable_of(name))
        return value if value is not None else self.parameters.get(name)

    def resolve(self, value: Any) -> Any:
        """Resolve the intrinsics the local stack understands: Ref to a parameter, and If on a condition."""
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in self.parameters:
            resolved = self.parameter(value["Ref"])
            spec = self.raw["Parameters"][value["Ref"]]
            if spec.get("Type") == "CommaDelimitedList":
                return [part.strip() for part in str(resolved or "").split(",") if part.strip()]
            return resolved
        if isinstance(value, dict) and set(value) == {"Fn::If"}:
            condition, when_true, when_false = value["Fn::If"]
            return self.resolve(when_true if self.condition(condition) else when_false)
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        return value

    def environment_of(self, function: str, resources: dict[str, str]) -> dict[str, str]:
        """The variables the template gives `function`, as a deployed stack resolves them, locally.

        A parameter is its variable's value when set, else its default (`parameter`); a resource is its
        local stand-in from `resources` (the tables, by logical id); a resource that exists only in AWS
        (a Secrets Manager secret) and AWS::NoValue leave the variable out.
        """
        environment: dict[str, str] = {}
        for name, raw in self.functions[function].variables.items():
            value = self._local_value(raw, resources)
            if value is not None:
                environment[name] = value
        return environment

    def _local_value(self, raw: Any, resources: dict[str, str]) -> str | None:
        if isinstance(raw, dict) and set(raw) == {"Fn::If"}:
            condition, when_true, when_false = raw["Fn::If"]
            return self._local_value(when_true if self.condition(condition) else when_false, resources)
        if isinstance(raw, dict) and set(raw) == {"Ref"}:
            if raw["Ref"] in self.parameters:
                value = self.resolve(raw)
                return ",".join(value) if isinstance(value, list) else ("" if value is None else str(value))
            return resources.get(raw["Ref"])
        return str(raw) if isinstance(raw, str | int) else None

    def condition(self, name: str) -> bool:
        """Evaluate a template condition built from Equals/Not/Join over parameters."""
        return bool(self._evaluate(self.raw["Conditions"][name]))

    def _evaluate(self, expression: Any) -> Any:
        if isinstance(expression, dict) and "Fn::Equals" in expression:
            left, right = (self._evaluate(item) for item in expression["Fn::Equals"])
            return left == right
        if isinstance(expression, dict) and "Fn::Not" in expression:
            return not self._evaluate(expression["Fn::Not"][0])
        if isinstance(expression, dict) and "Fn::Join" in expression:
            separator, items = expression["Fn::Join"]
            return separator.join(str(item) for item in self._evaluate(items))
        if isinstance(expression, dict) and "Condition" in expression:
            return self.condition(expression["Condition"])
        return self.resolve(expression)

    def _edge(self, props: dict[str, Any]) -> EdgeSpec:
        routes = self.resolve(props.get("DefaultRouteSettings", {}))
        cors = self.resolve(props.get("CorsConfiguration"))
        cors = cors if isinstance(cors, dict) else {}
        return EdgeSpec(
            burst_limit=int(routes["ThrottlingBurstLimit"]) if routes.get("ThrottlingBurstLimit") else None,
            rate_limit=float(routes["ThrottlingRateLimit"]) if routes.get("ThrottlingRateLimit") else None,
            cors_origins=tuple(cors.get("AllowOrigins", [])),
            cors_methods=tuple(cors.get("AllowMethods", [])),
            cors_headers=tuple(cors.get("AllowHeaders", [])),
            cors_max_age=int(cors.get("MaxAge", 0)),
        )

    def _add_auth(self, props: dict[str, Any]) -> None:
        """The api's Lambda authorizers, and each route's authorization as the parameters decide it."""
        auth = props.get("Auth", {})
        for name, spec in auth.get("Authorizers", {}).items():
            identity = spec.get("Identity", {})
            self.authorizers[name] = AuthorizerSpec(
                function=spec["FunctionArn"]["Fn::GetAtt"][0],
                identity_headers=tuple(identity.get("Headers", [])),
                ttl_seconds=int(self.resolve(identity.get("ReauthorizeEvery", 300))),
                simple_responses=bool(spec.get("EnableSimpleResponses", False)),
            )
        default = auth.get("DefaultAuthorizer")
        self.authorizer = self.authorizers.get(default) if default else None
        paths = (props.get("DefinitionBody") or {}).get("paths", {})
        for index, route in enumerate(self.routes):
            if route.auth:
                continue  # the event's own Auth.Authorizer
            operation = paths.get(route.path, {}).get(route.method.lower(), {})
            security = self.resolve(operation.get("security")) if "security" in operation else None
            chosen = next(iter(security[0]), "NONE") if security else (default or "NONE")
            self.routes[index] = RouteSpec(route.method, route.path, route.function, chosen)

    def hash_key(self, table: str) -> str:
        """The partition key attribute of a table."""
        schema = self.tables[table]["KeySchema"]
        return str(next(key["AttributeName"] for key in schema if key["KeyType"] == "HASH"))

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
            variables=environment,
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
                        auth=str(auth.get("Authorizer", "")),  # "": decided once the api is read (_add_auth)
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
            elif event["Type"] == "SQS":
                queue = event_props["Queue"]
                self.queue_mappings.append(
                    QueueMappingSpec(
                        function=logical_id,
                        queue=queue["Fn::GetAtt"][0] if isinstance(queue, dict) else str(queue),
                        batch_size=int(event_props.get("BatchSize", 10)),
                        report_item_failures="ReportBatchItemFailures" in event_props.get("FunctionResponseTypes", []),
                        max_concurrency=int(event_props.get("ScalingConfig", {}).get("MaximumConcurrency", 1000)),
                    )
                )
            elif event["Type"] in ("Schedule", "ScheduleV2"):
                self.schedules.append(ScheduleSpec(function=logical_id, expression=event_props["Schedule"]))

    def route_for(self, method: str, path: str) -> tuple[RouteSpec, dict[str, str]] | None:
        """The route serving `method path`, with its path parameters. As API Gateway does, a final slash is not
        part of the match (`/console/` is served by `GET /console`); the function still sees the path as sent."""
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return route, params
        return None
