"""The embedded DynamoDB: moto's server mode on loopback, tables created from the template's own definitions.

moto answers behind `dynamodb_front.DynamoDBFront`, which keeps each conditional write atomic per item
(no lock over all requests), makes transactions conflict and honour ClientRequestToken as DynamoDB
does, and injects DynamoDB's contention answers when asked to (DYNAMODB_FAULTS).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from dataclasses import dataclass
from typing import Any

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from devstack.dynamodb_faults import Faults
from devstack.dynamodb_front import DynamoDBFront, install_item_level_transactions

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


def _key_names(table_name: str) -> tuple[str, ...]:
    """A table's key attribute names, from moto's backend (the one account and region the stack uses)."""
    from moto.dynamodb.models import dynamodb_backends

    for regions in dynamodb_backends.values():
        for backend in regions.values():
            table = backend.tables.get(table_name)
            if table is not None:
                return (table.hash_key_attr, *([table.range_key_attr] if table.range_key_attr else []))
    raise KeyError(table_name)  # moto answers ResourceNotFoundException itself


@dataclass
class EmbeddedDynamoDB:
    """moto's DynamoDB + DynamoDB Streams over HTTP on a loopback address."""

    server: BaseWSGIServer
    thread: threading.Thread
    endpoint_url: str
    front: DynamoDBFront

    @classmethod
    def start(cls, host: str = "127.0.0.1", port: int | None = None, faults: Faults | None = None) -> EmbeddedDynamoDB:
        """Start the server on a loopback port (any other address is refused); `faults` off by default."""
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the embedded DynamoDB binds to loopback only, not {host}")
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per request otherwise
        install_item_level_transactions()
        front = DynamoDBFront(DomainDispatcherApplication(create_backend_app), _key_names, faults)
        server = make_server(host, port or 0, front, threaded=True, request_handler=MotoRequestHandler)
        thread = threading.Thread(target=server.serve_forever, name="embedded-dynamodb", daemon=True)
        thread.start()
        return cls(server=server, thread=thread, endpoint_url=f"http://{host}:{server.server_port}", front=front)

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


def create_table(client: Any, table_name: str, definition: dict[str, Any], *, with_ttl: bool = True) -> str | None:
    """Create a table from its template Properties (stream and TTL included); returns its stream ARN.

    `with_ttl=False` for an implementation without UpdateTimeToLive (dynalite): the table is the same,
    only nothing would ever expire its items.
    """
    request: dict[str, Any] = {key: definition[key] for key in _CREATE_TABLE_KEYS if key in definition}
    stream = definition.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    client.create_table(TableName=table_name, **request)
    ttl = definition.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled") and with_ttl:
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    description = client.describe_table(TableName=table_name)["Table"]
    return description.get("LatestStreamArn")
