"""Every table of template.yaml, created on an embedded DynamoDB under fresh names."""

from __future__ import annotations

import time
import uuid
from functools import cache
from typing import Any

from devstack.dynamodb import EmbeddedDynamoDB, create_table
from devstack.template import SamTemplate


@cache
def _template() -> SamTemplate:
    return SamTemplate.load()


def make_table(client: Any, backend: str, prefix: str, table_id: str) -> str:
    """One table of template.yaml under a fresh name (on dynalite without TTL, which it lacks), once ACTIVE.

    dynalite answers CreateTable before the table exists (`CREATING`, even with createTableMs 0): a request that
    follows at once can find no table, and a DeleteTable that follows at once is refused as in use.
    """
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    create_table(client, name, _template().tables[table_id], with_ttl=backend != "dynalite")
    deadline = time.monotonic() + 10
    while client.describe_table(TableName=name)["Table"]["TableStatus"] != "ACTIVE":
        if time.monotonic() > deadline:
            raise AssertionError(f"table {name} is not ACTIVE after 10 s")
        time.sleep(0.01)
    return name


def create_all_tables(database: EmbeddedDynamoDB) -> dict[str, str]:
    """Create each table; returns the functions' variables (LEASES_TABLE, ...) mapped to the names used."""
    template = SamTemplate.load()
    names: dict[str, str] = {}
    for table_id, variable in template.table_variables.items():
        name = f"{variable.lower().replace('_', '-')}-{uuid.uuid4().hex[:8]}"
        create_table(database.client(), name, template.tables[table_id])
        names[variable] = name
    return names
