"""What workers really cost, as seen at activation: the owner budgets' estimate where a provider's own
(RunPod's catalog) says less.

One item per provider, kind and GPU class in the counters table (`price#<provider>#<kind>#<gpu>`): the
cost per hour (micro-dollars) of the last worker of that sort activated whose price its provider's
estimate did not cover, and when it was seen. An acquire reserves the dearer of the estimate and this,
so once one pod has shown that pods bill above the catalog, concurrent acquires reserve what they will
really cost and the ones that do not fit are refused before a pod is made for nothing. Prices change:
a price seen more than `PRICE_SEEN_SECONDS` ago no longer counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scheduler.store.client import TableClient
from scheduler.store.items import epoch, number_attr, string_attr

PRICE_PREFIX = "price#"
PRICE_SEEN_SECONDS = 3600


def price_key(provider: str, kind: str, gpu: str) -> str:
    """The item of one sort of worker's price."""
    return f"{PRICE_PREFIX}{provider}#{kind}#{gpu}"


class PriceBook(TableClient):
    """Reading and noting the prices workers were seen to cost."""

    def seen_prices(self, keys: Sequence[str], now: datetime) -> dict[str, int]:
        """The prices (micro-dollars per hour) seen within PRICE_SEEN_SECONDS, of those of `keys` there are."""
        if not keys or not self.counters_table:
            return {}
        table = self.counters_table
        request = {table: {"Keys": [{"counter": string_attr(key)} for key in dict.fromkeys(keys)]}}
        response = self._call("BatchGetItem", RequestItems=request)
        # Unprocessed keys are read as unseen: the estimate is then the provider's own, as before any was seen.
        found: dict[str, int] = {}
        for item in response.get("Responses", {}).get(table, []):
            seen_at = int(item.get("seen_at", {}).get("N", "0"))
            if "price" in item and epoch(now) - seen_at <= PRICE_SEEN_SECONDS:
                found[item["counter"]["S"]] = int(item["price"]["N"])
        return found

    def note_price(self, key: str, price_micros: int, now: datetime) -> None:
        """Record what a worker of this sort costs (the last one seen stands)."""
        if not self.counters_table:
            return
        self._call(
            "UpdateItem",
            TableName=self.counters_table,
            Key={"counter": string_attr(key)},
            UpdateExpression="SET price = :price, seen_at = :now, #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={
                ":price": number_attr(price_micros),
                ":now": number_attr(epoch(now)),
                ":ttl": number_attr(epoch(now) + 2 * PRICE_SEEN_SECONDS),
            },
        )
