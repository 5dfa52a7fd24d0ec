"""`make run` keeps its tables: every item snapshot to a JSON file, periodically and on stop, restored at start.

moto keeps everything in memory, so without this a restart forgets every lease, counter and
idempotency key, and the reconciler then removes the still-running workers as orphans. The snapshot
is a strongly consistent Scan of each table, written atomically (temporary file, then rename), so a
crash mid-write leaves the previous snapshot intact. Restoring writes the items back into the tables
`make run` created from template.yaml; a table the template no longer has is reported and skipped.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("devstack.snapshot")

FORMAT = 1


@dataclass
class TableSnapshots:
    """The snapshot file of the embedded DynamoDB's tables."""

    path: Path
    client: Any  # a boto3 DynamoDB client on the embedded DynamoDB
    tables: tuple[str, ...]

    def save(self) -> int:
        """Write every item of every table (consistent Scan); returns how many items were written."""
        snapshot: dict[str, list[dict[str, Any]]] = {}
        for table in self.tables:
            pages = self.client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            snapshot[table] = [item for page in pages for item in page.get("Items", [])]
        document = {"format": FORMAT, "saved_at": time.time(), "tables": snapshot}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.unlink(missing_ok=True)
        # Mode 0600, as the generated secret beside it: it holds the webhooks' signing secrets and workers' tokens.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(document, separators=(",", ":")))
        os.replace(temporary, self.path)
        return sum(len(items) for items in snapshot.values())

    def restore(self) -> dict[str, int]:
        """Write the snapshot's items back; returns items restored per table (empty without a snapshot)."""
        if not self.path.exists():
            return {}
        document = json.loads(self.path.read_text())
        if document.get("format") != FORMAT:
            raise ValueError(f"{self.path}: unknown snapshot format {document.get('format')!r}")
        restored: dict[str, int] = {}
        for table, items in document["tables"].items():
            if table not in self.tables:
                log.warning("snapshot has table %s, which the template no longer makes; skipped", table)
                continue
            for start in range(0, len(items), 25):
                pending: dict[str, Any] = {
                    table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
                }
                while pending:
                    pending = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            restored[table] = len(items)
        return restored
