"""An in-process moto server on loopback, and DynamoDB tables built from `template.yaml`.

The table schema comes from the SAM template only, so tests run against exactly the keys, index and
stream the stack deploys:

    server = start_moto_server()
    client = server.dynamodb_client()
    names = create_tables_from_template(client, TEMPLATE, {"LeasesTable": "leases-test"})
    ...
    server.stop()
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import boto3
import yaml
from botocore.config import Config
from moto.server import ThreadedMotoServer

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
TEMPLATE_PATH: Final = REPO_ROOT / "template.yaml"

REGION: Final = "us-east-1"
FAKE_AWS_ENV: Final[Mapping[str, str]] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
"""Environment for anything that builds its own boto3 client: fake credentials, never a real account."""

DynamoDBClient = Any
"""A boto3 DynamoDB client (the service stubs are not installed, so it is untyped)."""

# CreateTable parameters taken from an AWS::DynamoDB::Table's Properties as they are.
_PASS_THROUGH: Final = (
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
    "OnDemandThroughput",
    "TableClass",
)
_INDEX_KEYS: Final = ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput", "OnDemandThroughput")


class TemplateError(ValueError):
    """The template holds something these helpers cannot turn into a CreateTable call."""


class _CfnLoader(yaml.SafeLoader):
    """A SafeLoader that accepts CloudFormation short tags: `!Ref X` → {"Ref": "X"}, `!Sub s` → {"Fn::Sub": s}."""


def _construct_tag(loader: _CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    key = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:
        raise TemplateError(f"cannot read !{suffix} at {node.start_mark}")
    return {key: value}


_CfnLoader.add_multi_constructor("!", _construct_tag)


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    """The template as plain data; intrinsic functions stay as {"Ref": ...} / {"Fn::...": ...}."""
    with path.open(encoding="utf-8") as handle:
        data = yaml.load(handle, Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(data, dict):
        raise TemplateError(f"{path} is not a CloudFormation template")
    return data


@dataclass(frozen=True)
class TableSpec:
    """One AWS::DynamoDB::Table of the template, as DynamoDB API requests."""

    logical_id: str
    create_request: dict[str, Any]
    """CreateTable parameters, without TableName."""
    time_to_live: dict[str, Any] | None
    """UpdateTimeToLive's TimeToLiveSpecification, when the template enables TTL."""
    template_table_name: str | None
    """The literal TableName of the template, if it sets one."""


def table_specs(path: Path = TEMPLATE_PATH) -> dict[str, TableSpec]:
    """Every AWS::DynamoDB::Table resource of the template, by logical id."""
    resources = load_template(path).get("Resources") or {}
    specs: dict[str, TableSpec] = {}
    for logical_id, resource in resources.items():
        if not isinstance(resource, dict) or resource.get("Type") != "AWS::DynamoDB::Table":
            continue
        specs[logical_id] = _table_spec(logical_id, resource.get("Properties") or {})
    return specs


def _table_spec(logical_id: str, props: dict[str, Any]) -> TableSpec:
    request: dict[str, Any] = {}
    for name in _PASS_THROUGH:
        if name in props:
            request[name] = _literal(props[name], f"{logical_id}.{name}")
    indexes = {"GlobalSecondaryIndexes": _INDEX_KEYS, "LocalSecondaryIndexes": ("IndexName", "KeySchema", "Projection")}
    for name, keys in indexes.items():
        if name in props:
            request[name] = [
                {key: _literal(index[key], f"{logical_id}.{name}.{key}") for key in keys if key in index}
                for index in props[name]
            ]
    stream = props.get("StreamSpecification")
    if stream is not None:
        view_type = _literal(stream["StreamViewType"], f"{logical_id}.StreamSpecification")
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view_type}
    ttl = props.get("TimeToLiveSpecification")
    time_to_live = None
    if ttl is not None and _literal(ttl.get("Enabled", False), f"{logical_id}.TimeToLiveSpecification") is True:
        time_to_live = {"Enabled": True, "AttributeName": _literal(ttl["AttributeName"], f"{logical_id}.ttl")}
    table_name = props.get("TableName")
    return TableSpec(
        logical_id=logical_id,
        create_request=request,
        time_to_live=time_to_live,
        template_table_name=table_name if isinstance(table_name, str) else None,
    )


def _literal(value: Any, where: str) -> Any:
    """`value`, refusing an unresolved intrinsic function (this helper resolves none)."""
    if isinstance(value, dict):
        intrinsic = (len(value) == 1 and next(iter(value)) in ("Ref", "Condition")) or any(
            str(key).startswith("Fn::") for key in value
        )
        if intrinsic:
            raise TemplateError(f"{where} uses an intrinsic function ({value}); tests cannot resolve it")
        return {key: _literal(item, where) for key, item in value.items()}
    if isinstance(value, list):
        return [_literal(item, where) for item in value]
    return value


def create_tables_from_template(
    client: DynamoDBClient,
    template_path: Path = TEMPLATE_PATH,
    table_names: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Create every table of the template and apply its TTL; returns logical id → table name.

    `table_names` names tables by logical id; a table not named there keeps the template's literal
    TableName, else its logical id.
    """
    created: dict[str, str] = {}
    for logical_id, spec in table_specs(template_path).items():
        name: str = (table_names or {}).get(logical_id) or spec.template_table_name or logical_id
        client.create_table(TableName=name, **spec.create_request)
        client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        if spec.time_to_live is not None:
            client.update_time_to_live(TableName=name, TimeToLiveSpecification=spec.time_to_live)
        created[logical_id] = name
    return created


@dataclass
class MotoServer:
    """A running moto server bound to a loopback address."""

    endpoint_url: str
    region: str = REGION
    _server: ThreadedMotoServer | None = field(default=None, repr=False)

    def session(self) -> boto3.session.Session:
        """A boto3 session with fake credentials (it can never reach a real account)."""
        return boto3.session.Session(
            aws_access_key_id=FAKE_AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_AWS_ENV["AWS_SESSION_TOKEN"],
            region_name=self.region,
        )

    def client(self, service: str) -> Any:
        """A boto3 client for `service` talking to this server only."""
        config = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)
        return self.session().client(service, endpoint_url=self.endpoint_url, config=config)  # type: ignore[call-overload]

    def dynamodb_client(self) -> DynamoDBClient:
        """A DynamoDB client on this server."""
        return self.client("dynamodb")

    def stop(self) -> None:
        """Shut the server down; stopping twice is fine."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()


def start_moto_server(host: str = "127.0.0.1") -> MotoServer:
    """Start moto on `host` (loopback only) on a port the OS picks."""
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"moto must listen on loopback only, not {host}")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
    server = ThreadedMotoServer(ip_address=host, port=0, verbose=False)
    server.start()
    bound_host, port = server.get_host_and_port()
    return MotoServer(endpoint_url=f"http://{bound_host}:{port}", _server=server)
