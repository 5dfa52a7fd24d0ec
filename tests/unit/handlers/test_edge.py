"""The authorizer and the health check."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.config import Secret, Settings
from scheduler.runtime import Runtime

from .conftest import SECRET, Function, event


def test_the_authorizer_lets_the_shared_secret_through(function: Callable[[str], Function]) -> None:
    assert function("authorizer")(event("authorizer")) == {"isAuthorized": True}


def test_the_authorizer_refuses_another_secret(function: Callable[[str], Function]) -> None:
    sample = event("authorizer")
    sample["headers"]["x-internal-secret"] = SECRET + "x"
    assert function("authorizer")(sample) == {"isAuthorized": False}


def test_the_authorizer_reads_the_secret_from_its_settings(function: Callable[[str], Function]) -> None:
    authorizer = function("authorizer", Runtime(Settings(internal_secret=Secret("rotated"))))
    sample = event("authorizer")
    sample["headers"]["x-internal-secret"] = "rotated"
    assert authorizer(sample) == {"isAuthorized": True}


def test_the_health_check_answers_ok() -> None:
    from functions.health import app

    response = app.lambda_handler(event("health"), None)
    assert (response["statusCode"], response["body"]) == (200, '{"status":"ok","service":"openalice-scheduler"}')
