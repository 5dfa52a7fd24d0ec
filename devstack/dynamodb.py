"""The embedded DynamoDB: moto's server mode on loopback, tables created from the template's own definitions."""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

DynamoDBClient = Any  # a boto3 DynamoDB client (botocore builds its type at run time)

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",  # moto's fake credentials  # nosec B105
    "AWS_SESSION_TOKEN": "local",  # moto's fake credentials  # nosec B105
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
# CreateTable takes these; the rest (PITR, SSE, tags, deletion protection) are deployment concerns.
_CREATE_TABLE_KEYS = (
    "AttributeDefinitions",
    "KeySchema",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "BillingMode",
)


class _OneRequestAtATime:
    """Serialises moto's request handling: DynamoDB applies each conditional write atomically, moto
    does not under concurrent requests, and the local stack must not let two claims both win."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            return list(self._app(environ, start_response))


@dataclass
class EmbeddedDynamoDB:
    """moto's DynamoDB + DynamoDB Streams over HTTP on a loopback address."""

    server: BaseWSGIServer
    thread: threading.Thread
    endpoint_url: str

    @classmethod
    def start(cls, host: str = "127.0.0.1", port: int | None = None) -> EmbeddedDynamoDB:
        """Start the server on a loopback port (any other address is refused)."""
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the embedded DynamoDB binds to loopback only, not {host}")
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per request otherwise
        app = _OneRequestAtATime(DomainDispatcherApplication(create_backend_app))
        server = make_server(host, port or 0, app, threaded=True, request_handler=MotoRequestHandler)
        thread = threading.Thread(target=server.serve_forever, name="embedded-dynamodb", daemon=True)
        thread.start()
        return cls(server=server, thread=thread, endpoint_url=f"http://{host}:{server.server_port}")

    def client(self, service: str = "dynamodb") -> Any:
        """A boto3 client for `dynamodb` or `dynamodbstreams` on this server."""
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=self.endpoint_url,
            region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def stop(self) -> None:
        """Stop the server; its tables are gone with it."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def create_table(client: Any, table_name: str, definition: dict[str, Any]) -> str | None:
    """Create a table from its template Properties (stream and TTL included); returns its stream ARN."""
    request: dict[str, Any] = {key: definition[key] for key in _CREATE_TABLE_KEYS if key in definition}
    stream = definition.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    client.create_table(TableName=table_name, **request)
    ttl = definition.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    description = client.describe_table(TableName=table_name)["Table"]
    return description.get("LatestStreamArn")
