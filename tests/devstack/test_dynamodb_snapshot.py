"""`make run`'s tables survive a restart: a snapshot of every item, restored into fresh tables."""

from __future__ import annotations

from pathlib import Path

from devstack.dynamodb import EmbeddedDynamoDB
from devstack.dynamodb_snapshot import TableSnapshots
from tests.support.tables import make_table


def lease_item(index: int) -> dict[str, dict[str, str]]:
    return {
        "lease_id": {"S": f"00000000-0000-4000-8000-{index:012d}"},
        "status": {"S": "active"},
        "live_shard": {"S": "0"},
        "due_at": {"N": str(1_800_000_000 + index)},
        "cost_per_hour": {"N": "0.42"},
        "held_counters": {"SS": ["provider#local-docker"]},
    }


def test_every_item_is_restored_as_it_was(server: EmbeddedDynamoDB, tmp_path: Path) -> None:
    client = server.client()
    before = make_table(client, "moto", "leases", "LeasesTable")
    items = [lease_item(index) for index in range(60)]  # more than one BatchWriteItem
    for item in items:
        client.put_item(TableName=before, Item=item)
    path = tmp_path / "tables.json"
    assert TableSnapshots(path, client, (before,)).save() == 60

    # A restart: the same table name, created anew and empty, then restored.
    client.delete_table(TableName=before)
    make_again = make_table(client, "moto", "leases", "LeasesTable")
    document = path.read_text().replace(before, make_again)
    path.write_text(document)
    restored = TableSnapshots(path, client, (make_again,)).restore()

    stored = client.scan(TableName=make_again, ConsistentRead=True)["Items"]
    assert restored == {make_again: 60}
    assert sorted(stored, key=lambda item: item["lease_id"]["S"]) == items


def test_without_a_snapshot_nothing_is_restored(server: EmbeddedDynamoDB, tmp_path: Path) -> None:
    table = make_table(server.client(), "moto", "leases", "LeasesTable")
    assert TableSnapshots(tmp_path / "none.json", server.client(), (table,)).restore() == {}


def test_a_snapshot_is_replaced_whole_or_not_at_all(server: EmbeddedDynamoDB, tmp_path: Path) -> None:
    client = server.client()
    table = make_table(client, "moto", "leases", "LeasesTable")
    client.put_item(TableName=table, Item=lease_item(1))
    snapshots = TableSnapshots(tmp_path / "tables.json", client, (table,))
    snapshots.save()
    snapshots.save()
    assert [path.name for path in tmp_path.iterdir()] == ["tables.json"]  # no temporary file left behind


def test_a_table_the_template_no_longer_makes_is_skipped(server: EmbeddedDynamoDB, tmp_path: Path) -> None:
    client = server.client()
    gone = make_table(client, "moto", "leases", "LeasesTable")
    client.put_item(TableName=gone, Item=lease_item(1))
    path = tmp_path / "tables.json"
    TableSnapshots(path, client, (gone,)).save()
    kept = make_table(client, "moto", "leases", "LeasesTable")
    assert TableSnapshots(path, client, (kept,)).restore() == {}


def test_the_snapshot_is_readable_by_its_owner_only(server: EmbeddedDynamoDB, tmp_path: Path) -> None:
    """It holds the webhooks' signing secrets and the workers' tokens, as the generated secret beside it does."""
    client = server.client()
    table = make_table(client, "moto", "webhooks", "WebhooksTable")
    client.put_item(
        TableName=table, Item={"webhook_id": {"S": "wh_1"}, "owner_id": {"S": "a"}, "secret": {"S": "whsec_x"}}
    )
    path = tmp_path / "tables.json"

    TableSnapshots(path, client, (table,)).save()

    assert path.stat().st_mode & 0o777 == 0o600
