"""The embedded DynamoDB: moto's server mode on loopback, tables created from the template's own definitions."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
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


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class EmbeddedDynamoDB:
    """moto's DynamoDB + DynamoDB Streams over HTTP on 127.0.0.1."""

    server: ThreadedMotoServer
    endpoint_url: str

    @classmethod
    def start(cls, port: int | None = None) -> EmbeddedDynamoDB:
        """Start the server on a loopback port."""
        port = port or free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        return cls(server=server, endpoint_url=f"http://127.0.0.1:{port}")

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
        self.server.stop()


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
