"""Every route of template.yaml but `GET /health` and the console's files goes through the edge that establishes
who is calling (`http_endpoint`) before its handler runs: read from the template itself, so a route added without
it is named here. Run, each such route answers a refused credential 401 (`token` mode; `iam` mode without a
principal) and an unmapped principal 403 (`iam` mode), whatever its handler would have done.
"""

from __future__ import annotations

import ast
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from devstack.template import RouteSpec, SamTemplate
from scheduler.api.identity import UNAUTHORIZED
from scheduler.runtime import Runtime
from tests.support.metrics import RecordedMetrics

from ..conftest import memory_store
from .as_callers import with_principals
from .conftest import Function, runtime_of

TEMPLATE = SamTemplate.load()
# No credential at all: liveness for load balancers (its function imports nothing), and the console's page and files
# (they hold no data: the page asks the guarded routes with the operator's credential).
OPEN = {"GET /health", "GET /console", "GET /console/{asset}"}
GUARDED = [route for route in TEMPLATE.routes if route.route_key not in OPEN]


def function_dir(route: RouteSpec) -> str:
    return TEMPLATE.functions[route.function].code_dir.name


def goes_through_the_edge(route: RouteSpec) -> bool:
    """Its handler's innermost decorator is `http_endpoint`, and its module holds the `runtime` the edge reads."""
    spec = TEMPLATE.functions[route.function]
    tree = ast.parse((spec.code_dir / f"{spec.module}.py").read_text())
    handler = next(
        (node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == spec.handler), None
    )
    runtime = any(
        isinstance(target, ast.Name) and target.id == "runtime"
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
    )
    return (
        handler is not None and [ast.unparse(d) for d in handler.decorator_list][-1:] == ["http_endpoint"] and runtime
    )


def test_every_route_but_the_open_ones_goes_through_the_callers_edge() -> None:
    assert {route.route_key for route in TEMPLATE.routes} >= OPEN and GUARDED
    missing = [f"{route.route_key} ({function_dir(route)})" for route in GUARDED if not goes_through_the_edge(route)]
    assert not missing, f"routes whose function does not establish the caller (http_endpoint): {missing}"


def test_health_and_the_console_s_files_are_the_only_routes_open_to_anyone() -> None:
    assert sorted(route.route_key for route in TEMPLATE.routes if not route.authorized) == sorted(OPEN)


@pytest.fixture(params=["token", "iam"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def runtime(mode: str) -> Runtime:
    """No lease, no registry: a request the edge refuses never reaches either."""
    return with_principals(runtime_of(memory_store(), metrics=RecordedMetrics(), auth_mode=mode))


def request_to(route: RouteSpec, authorizer: dict[str, Any]) -> dict[str, Any]:
    """A request on `route` as API Gateway hands it on (path parameters filled in)."""
    parameters = {"lease_id": str(uuid.uuid4()), "name": "anim", "webhook_id": str(uuid.uuid4())}
    path = route.path.format(**parameters)
    used = {name: value for name, value in parameters.items() if f"{{{name}}}" in route.path}
    return {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path,
        "headers": {"content-type": "application/json"},
        "pathParameters": used,
        "body": "{}",
        "requestContext": {
            "http": {"method": route.method, "path": path},
            "requestId": "r-1",
            "authorizer": authorizer,
        },
    }


@pytest.mark.parametrize("route", GUARDED, ids=lambda route: route.route_key)
def test_a_refused_credential_is_401_on_every_route(
    function: Callable[[str], Function], mode: str, route: RouteSpec
) -> None:
    refused = {"lambda": {"refused": "unknown, revoked or expired token"}} if mode == "token" else {}
    status, body = function(function_dir(route)).http(request_to(route, refused))
    assert (status, body) == (401, {"error": {"code": "unauthorized", "message": UNAUTHORIZED}})


@pytest.mark.parametrize("mode", ["iam"])
@pytest.mark.parametrize("route", GUARDED, ids=lambda route: route.route_key)
def test_an_unmapped_principal_is_403_on_every_route(function: Callable[[str], Function], route: RouteSpec) -> None:
    stranger = {"iam": {"userArn": "arn:aws:iam::123456789012:user/stranger", "accountId": "123456789012"}}
    status, body = function(function_dir(route)).http(request_to(route, stranger))
    assert (status, body["error"]["code"]) == (403, "forbidden")
