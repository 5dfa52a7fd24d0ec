"""The local gateway routes a request as API Gateway's HTTP API does: a final slash is not part of the match (so
`/console/` is the console's page route), the function sees the path as it was sent, and the console's routes need
no credential in any AUTH_MODE."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from devstack.gateway import LocalHttpApi
from devstack.template import SamTemplate


class RecordingLambdas:
    """Every function answers with the route and path it was invoked for."""

    def __init__(self) -> None:
        self.invoked: list[str] = []

    def invoke(self, function: str, event: dict[str, Any], request_id: str | None = None) -> Any:
        self.invoked.append(function)
        body = {"route": event["routeKey"], "path": event["rawPath"], "parameters": event.get("pathParameters")}
        return {"statusCode": 200, "body": json.dumps(body)}


@pytest.fixture(params=["secret", "token", "iam"])
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, RecordingLambdas]]:
    monkeypatch.setenv("AUTH_MODE", request.param)
    lambdas = RecordingLambdas()
    server = LocalHttpApi(("127.0.0.1", 0), SamTemplate.load(), lambdas)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", lambdas
    server.shutdown()
    server.server_close()


def test_the_console_page_with_its_final_slash_is_served_by_the_console_route(
    api: tuple[str, RecordingLambdas],
) -> None:
    url, lambdas = api
    answer = requests.get(url + "/console/", timeout=10)
    assert answer.status_code == 200
    assert answer.json() == {"route": "GET /console", "path": "/console/", "parameters": None}
    assert lambdas.invoked == ["ConsoleFunction"]


def test_a_console_file_is_served_without_a_credential(api: tuple[str, RecordingLambdas]) -> None:
    url, lambdas = api
    answer = requests.get(url + "/console/main.js", timeout=10)
    assert answer.json()["parameters"] == {"asset": "main.js"}
    assert lambdas.invoked == ["ConsoleFunction"]


def test_a_final_slash_on_an_api_route_reaches_the_same_route(api: tuple[str, RecordingLambdas]) -> None:
    url, _ = api
    assert requests.get(url + "/health/", timeout=10).json()["route"] == "GET /health"


def test_a_path_deeper_than_a_route_is_api_gateways_404(api: tuple[str, RecordingLambdas]) -> None:
    url, lambdas = api
    answer = requests.get(url + "/console/a/b", timeout=10)
    assert (answer.status_code, answer.json(), lambdas.invoked) == (404, {"message": "Not Found"}, [])
