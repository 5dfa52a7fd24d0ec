"""Numbers are checked against DynamoDB's documented limits before anything is written.

DynamoDB (and dynalite, which enforces it) refuses a number with more than 38 significant digits, a
magnitude outside 1E-130..9.99…E+125, NaN and infinity; moto stores them all. The store's check must
refuse exactly what DynamoDB refuses: each value is tried raw against dynalite and through the check.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduler.store.items import InvalidNumber, dynamodb_number, number_attr
from tests.support.dynalite import Dynalite
from tests.support.tables import make_table

VALUES = [
    0,
    -1,
    0.42,
    3600,
    1_764_475_200,
    9.5e125,
    -9.5e125,
    1e-130,
    Decimal("9.9999999999999999999999999999999999999E+125"),
    Decimal("1" * 38),
    Decimal("1" * 38 + "000"),  # trailing zeros are not significant
    float("nan"),
    float("inf"),
    float("-inf"),
    1e126,
    1e200,
    1e-131,
    1e-200,
    Decimal("1" * 39),
    Decimal("1." + "1" * 38),
]


@pytest.fixture(scope="module")
def strict_table(dynalite_server: Dynalite) -> str:
    return make_table(dynalite_server.client(), "dynalite", "numbers", "LeaseCountersTable")


def dynamodb_accepts(server: Dynalite, table: str, value: object) -> bool:
    client = server.client()
    text = str(value)
    try:
        client.put_item(TableName=table, Item={"counter": {"S": "n"}, "leases": {"N": text}})
    except client.exceptions.ClientError as error:
        assert error.response["Error"]["Code"] == "ValidationException", error
        return False
    return True


@pytest.mark.parametrize("value", VALUES, ids=[repr(value) for value in VALUES])
def test_the_store_refuses_exactly_the_numbers_dynamodb_refuses(
    dynalite_server: Dynalite, strict_table: str, value: float | int | Decimal
) -> None:
    try:
        number_attr(value)
        accepted = True
    except InvalidNumber:
        accepted = False
    assert accepted == dynamodb_accepts(dynalite_server, strict_table, value)


@pytest.mark.parametrize("value", [True, "1", None])
def test_a_value_that_is_no_number_is_refused(value: object) -> None:
    with pytest.raises(InvalidNumber):
        dynamodb_number(value)  # type: ignore[arg-type]


def test_a_float_is_written_as_its_shortest_exact_text() -> None:
    assert (dynamodb_number(0.1), dynamodb_number(1e20), dynamodb_number(3600)) == ("0.1", "1E+20", "3600")
