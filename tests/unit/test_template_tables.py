"""The test tables come from template.yaml itself: same keys, index, stream and TTL as deployed."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from devstack.dynamodb import DynamoDBClient, EmbeddedDynamoDB
from devstack.template import SamTemplate, load_yaml
from scheduler.store import LIVE_INDEX, STARTING_INDEX
from scheduler.store.queue import QUEUE_INDEX


def test_short_tags_are_read_as_intrinsic_functions() -> None:
    layers = load_yaml()["Resources"]["AuthorizerFunction"]["Properties"]["Layers"]
    assert layers[0] == {"Ref": "SchedulerLayer"}


def test_get_att_short_tag_is_split_into_resource_and_attribute() -> None:
    authorizers = load_yaml()["Resources"]["LeaseApi"]["Properties"]["Auth"]["Authorizers"]
    assert authorizers["InternalSecretAuthorizer"]["FunctionArn"] == {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}


@pytest.mark.dynamodb_only("reads the table's definition")
def test_leases_table_has_the_live_starting_and_queue_indexes(table_name: str, dynamodb: DynamoDBClient) -> None:
    table = dynamodb.describe_table(TableName=table_name)["Table"]
    indexes = [index["IndexName"] for index in table["GlobalSecondaryIndexes"]]
    assert indexes == [LIVE_INDEX, STARTING_INDEX, QUEUE_INDEX]


@pytest.mark.moto_only("dynalite has no streams")
@pytest.mark.dynamodb_only("reads the table's definition")
def test_leases_table_streams_new_and_old_images(table_name: str, dynamodb: DynamoDBClient) -> None:
    stream = dynamodb.describe_table(TableName=table_name)["Table"]["StreamSpecification"]
    assert stream == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


@pytest.mark.moto_only("dynalite has no TTL")
@pytest.mark.dynamodb_only("reads the table's definition")
def test_leases_table_expires_items_by_the_ttl_attribute(table_name: str, dynamodb: DynamoDBClient) -> None:
    ttl = dynamodb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "ttl")


def test_every_table_is_named_to_the_functions_by_a_global_variable() -> None:
    template = SamTemplate.load()
    assert template.table_variables == {
        "LeasesTable": "LEASES_TABLE",
        "LeaseCountersTable": "COUNTERS_TABLE",
        "IdempotencyTable": "IDEMPOTENCY_TABLE",
        "UsageTable": "USAGE_TABLE",
        "CallersTable": "CALLERS_TABLE",
        "LeaseEventsTable": "LEASE_EVENTS_TABLE",
        "WebhooksTable": "WEBHOOKS_TABLE",
    }


def test_embedded_dynamodb_listens_on_loopback(moto_server: EmbeddedDynamoDB) -> None:
    assert urlparse(moto_server.endpoint_url).hostname == "127.0.0.1"


def test_embedded_dynamodb_refuses_a_non_loopback_address() -> None:
    with pytest.raises(ValueError, match="loopback"):
        EmbeddedDynamoDB.start("0.0.0.0")  # noqa: S104 - the address under test, never bound
