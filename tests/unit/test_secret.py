"""`config.Secret`: its value shows nowhere but through `get_secret_value()` (not in a repr, a string, a
format, or any line the functions' logger writes, `scheduler.observability.log`)."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable

import pytest

from scheduler.config import Secret, Settings
from scheduler.observability.log import Logger

VALUE = "hunter2-0b5c4e"
MASK = "**********"


@pytest.mark.parametrize(
    "render",
    [
        repr,
        str,
        lambda secret: f"{secret}",
        lambda secret: f"{secret!s}",
        lambda secret: f"{secret:>20}",
        lambda secret: "%s" % secret,  # noqa: UP031 - %-formatting is what is under test
        lambda secret: "{}".format(secret),  # noqa: UP032 - str.format is what is under test
        lambda secret: format(secret),
    ],
    ids=["repr", "str", "f-string", "f-string !s", "f-string with a spec", "%s", "str.format", "format"],
)
def test_a_secret_renders_as_a_mask(render: Callable[[Secret], str]) -> None:
    shown = render(Secret(VALUE))
    assert VALUE not in shown and MASK in shown


def test_a_secret_reaches_no_log_line() -> None:
    stream = io.StringIO()
    logger = Logger(service=f"secret-{uuid.uuid4().hex}", stream=stream)
    secret = Secret(VALUE)

    logger.info(secret)
    logger.info("the key is %s", secret)
    logger.info(f"the key is {secret}")
    logger.info("the key", extra={"key": secret})
    logger.append_keys(key=secret)
    logger.info("with the key appended")

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 5
    assert VALUE not in stream.getvalue()
    assert [line["message"] for line in lines[:3]] == [MASK, f"the key is {MASK}", f"the key is {MASK}"]
    assert lines[3]["key"] == lines[4]["key"] == MASK


def test_only_get_secret_value_gives_the_value() -> None:
    assert Secret(VALUE).get_secret_value() == VALUE


def test_a_secret_is_no_string_to_hand_the_value_on() -> None:
    secret = Secret(VALUE)
    with pytest.raises(TypeError):
        "key: " + secret  # type: ignore[operator]
    with pytest.raises(TypeError):
        json.dumps({"key": secret})


def test_a_secret_is_true_only_when_it_holds_a_value() -> None:
    assert Secret(VALUE) and not Secret("")


def test_settings_with_the_same_secret_are_equal() -> None:
    first, second = (Settings.from_environ({"INTERNAL_SECRET": VALUE}) for _ in range(2))
    other = Settings.from_environ({"INTERNAL_SECRET": "another"})
    assert first == second and hash(first) == hash(second) and first != other
