"""openapi.yaml is a valid OpenAPI document that describes exactly the API template.yaml deploys.

Its schemas reach the code through scheduler/wire.py (`make contract`): tests/unit/test_wire_contract.py holds the
code's request rules, Lease and enums to them, and tests/client/test_wire_contract.py the client's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from devstack.template import SamTemplate
from scheduler.api.http import ERROR_STATUS

SPEC_PATH = Path(__file__).resolve().parents[2] / "openapi.yaml"
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")

# openapi.yaml's codes include one the functions do not raise yet: `rate_limited`, which its TooManyLeases response
# reserves for throttling by the service (no domain error maps to it).
CONTRACT_ONLY_CODES = {"rate_limited": 429}
# API Gateway answers these itself, with its own body: the authorizer's refusals and the route throttle.
AUTHORIZER_BODIES = {401: {"message": "Unauthorized"}, 403: {"message": "Forbidden"}}
THROTTLE_BODY = {429: {"message": "Too Many Requests"}}
GATEWAY_BODIES = {**AUTHORIZER_BODIES, **THROTTLE_BODY}
# The statuses each route must document at least (the spec may add more): its function's answers, as README's
# "What a caller sees when things fail" gives them, and the authorizer's 401 and 403 in front of it.
CONTRACT_STATUSES = {
    ("GET", "/health"): {200},
    ("GET", "/console"): {200, 302},
    ("GET", "/console/{asset}"): {200, 404},
    ("POST", "/v1/lease"): {201, 202, 400, 401, 403, 409, 429, 502, 503},
    ("GET", "/v1/leases"): {200, 400, 401, 403},
    ("GET", "/v1/lease/{lease_id}"): {200, 401, 403, 404},
    ("POST", "/v1/lease/{lease_id}/renew"): {200, 400, 401, 403, 404, 409, 429},
    ("DELETE", "/v1/lease/{lease_id}"): {204, 401, 403, 404},
    ("GET", "/v1/lease/{lease_id}/logs"): {200, 400, 401, 403, 404, 410, 502},
    ("DELETE", "/v1/leases"): {200, 400, 401, 403},
    ("GET", "/v1/queue"): {200, 400, 401, 403},
    ("GET", "/v1/usage"): {200, 400, 401, 403},
    ("GET", "/v1/callers"): {200, 401, 403},
    ("POST", "/v1/callers"): {201, 400, 401, 403, 409},
    ("POST", "/v1/callers/{name}/rotate"): {201, 400, 401, 403, 404, 409},
    ("DELETE", "/v1/callers/{name}"): {204, 401, 403, 404},
    ("GET", "/v1/lease/{lease_id}/events"): {200, 400, 401, 403, 404},
    ("GET", "/v1/webhooks"): {200, 400, 401, 403},
    ("POST", "/v1/webhooks"): {201, 400, 401, 403, 409},
    ("DELETE", "/v1/webhooks/{webhook_id}"): {204, 401, 403, 404},
}
# Open to anyone: liveness, and the console's page and files (they hold no data; the page calls the API with a
# credential the operator enters).
OPEN_PATHS = {"/health", "/console", "/console/{asset}"}
# The console's files: a page, scripts, a style sheet, an icon.
CONSOLE_TYPES = {"text/html", "text/javascript", "text/css", "image/svg+xml"}
# One security requirement per AUTH_MODE (alternatives): the shared secret, a caller's token, a SigV4 signature.
SECURITY = [{"internalSecret": []}, {"callerToken": []}, {"sigv4": []}]
OWNER_CHECKED = {
    ("DELETE", "/v1/lease/{lease_id}"),
    ("POST", "/v1/lease/{lease_id}/renew"),
    ("GET", "/v1/lease/{lease_id}/logs"),
    ("DELETE", "/v1/leases"),
    ("POST", "/v1/webhooks"),  # secret mode: X-Lease-Owner asserts the owner whose events go to the URL
    ("DELETE", "/v1/webhooks/{webhook_id}"),
}


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load keeps the last of two equal keys silently; a spec with a repeated status would lie."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        assert key not in seen, f"openapi.yaml line {key_node.start_mark.line + 1}: duplicate key {key!r}"
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    data = yaml.load(SPEC_PATH.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    assert isinstance(data, dict)
    return data


def _resolve(spec: dict[str, Any], node: Any) -> Any:
    """Follow local `$ref`s (recursively) so the tests read plain schemas."""
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = spec
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            merged = {**_resolve(spec, target), **{k: v for k, v in node.items() if k != "$ref"}}
            return _resolve(spec, merged)
        return {key: _resolve(spec, value) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolve(spec, item) for item in node]
    return node


def _operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def _json_schema(spec: dict[str, Any], response: dict[str, Any]) -> dict[str, Any] | None:
    content = _resolve(spec, response).get("content")
    if not content:
        return None
    if set(content) == {"text/plain"}:  # a worker's logs
        return None
    content = {kind: body for kind, body in content.items() if kind not in CONSOLE_TYPES}
    if not content:
        return None
    assert set(content) == {"application/json"}, "every body is JSON but a worker's logs and the console's files"
    schema = content["application/json"]["schema"]
    assert isinstance(schema, dict)
    return schema


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The body shapes a response schema allows (its oneOf branches, or itself)."""
    return list(schema.get("oneOf", [schema]))


def _envelope_codes(schema: dict[str, Any]) -> set[str] | None:
    """The error codes an error-envelope schema allows; None when it is not an envelope."""
    error = schema.get("properties", {}).get("error")
    if error is None:
        return None
    codes: set[str] = set()
    for part in [error, *error.get("allOf", [])]:
        code = part.get("properties", {}).get("code", {})
        if "enum" in code:
            codes |= set(code["enum"])
        if "const" in code:
            codes.add(code["const"])
    return codes


def _code_status() -> dict[str, int]:
    mapping: dict[str, int] = {}
    for status, code in ERROR_STATUS.values():
        assert mapping.setdefault(code, status) == status, f"{code} maps to two statuses"
    return {**mapping, **CONTRACT_ONLY_CODES}


# --- the document ------------------------------------------------------------------------------


def test_spec_is_a_valid_openapi_document(spec: dict[str, Any]) -> None:
    try:
        validate(spec)
    except OpenAPIValidationError as error:  # pragma: no cover - the message is the point
        pytest.fail(f"openapi.yaml is not valid OpenAPI: {error}")


def test_spec_is_openapi_3_1_with_the_local_stack_as_a_server(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.1.")
    assert "http://127.0.0.1:3000" in [server["url"] for server in spec["servers"]]


def test_every_operation_has_a_unique_operation_id(spec: dict[str, Any]) -> None:
    ids = [operation["operationId"] for _, _, operation in _operations(spec)]
    assert len(ids) == len(set(ids))


# --- routes and authorization ------------------------------------------------------------------


def test_spec_routes_are_exactly_the_template_http_api_routes(spec: dict[str, Any]) -> None:
    template_routes = {(route.method, route.path) for route in SamTemplate.load().routes}
    spec_routes = {(method, path) for method, path, _ in _operations(spec)}
    assert spec_routes == template_routes


def test_security_is_required_exactly_on_the_routes_the_template_authorizes(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert schemes["internalSecret"] == {**schemes["internalSecret"], "type": "apiKey", "name": "X-Internal-Secret"}
    assert schemes["callerToken"] == {**schemes["callerToken"], "type": "http", "scheme": "bearer"}
    assert schemes["sigv4"] == {
        **schemes["sigv4"],
        "type": "apiKey",
        "name": "Authorization",
        "x-amazon-apigateway-authtype": "awsSigv4",
    }
    authorized = {(route.method, route.path): route.authorized for route in SamTemplate.load().routes}
    for method, path, operation in _operations(spec):
        security = operation.get("security", spec.get("security", []))
        assert bool(security) == authorized[(method, path)], f"{method} {path}"
        if security:
            assert security == SECURITY, f"{method} {path}"


@pytest.mark.parametrize(
    ("mode", "scheme"), [("secret", "InternalSecretAuthorizer"), ("token", "CallerTokenAuthorizer"), ("iam", "AWS_IAM")]
)
def test_every_authorized_route_uses_the_authorization_of_the_mode(
    monkeypatch: pytest.MonkeyPatch, mode: str, scheme: str
) -> None:
    monkeypatch.setenv("AUTH_MODE", mode)
    routes = SamTemplate.load().routes
    assert {route.auth for route in routes if route.path not in OPEN_PATHS} == {scheme}
    assert {route.path: route.auth for route in routes if route.path in OPEN_PATHS} == dict.fromkeys(OPEN_PATHS, "NONE")


def test_authorized_routes_document_the_authorizer_answers(spec: dict[str, Any]) -> None:
    authorized = {(route.method, route.path) for route in SamTemplate.load().routes if route.authorized}
    for method, path, operation in _operations(spec):
        responses = operation["responses"]
        if (method, path) not in authorized:
            assert not {"401", "403"} & set(responses), f"{method} {path}"
            continue
        for status, body in AUTHORIZER_BODIES.items():
            _assert_gateway_body(spec, responses, status, body, f"{method} {path}")


def _assert_gateway_body(
    spec: dict[str, Any], responses: dict[str, Any], status: int, body: dict[str, str], where: str
) -> None:
    assert str(status) in responses, f"{where} lacks {status}"
    schema = _json_schema(spec, responses[str(status)])
    assert schema is not None
    gateway = [_resolve(spec, shape) for shape in _alternatives(_resolve(spec, schema))]
    gateway = [shape for shape in gateway if _envelope_codes(shape) is None]
    if status == 403:  # AUTH_MODE=iam: API Gateway refuses a signature in words of its own
        signature = [shape for shape in gateway if "const" not in shape["properties"]["message"]]
        assert len(signature) == 1 and signature[0]["properties"]["message"]["type"] == "string", where
        gateway = [shape for shape in gateway if shape not in signature]
    assert len(gateway) == 1, f"{where} {status}"
    assert gateway[0]["required"] == ["message"]
    assert gateway[0]["properties"] == {"message": {"const": body["message"]}}


def test_every_route_documents_the_gateway_throttle(spec: dict[str, Any]) -> None:
    edge = SamTemplate.load().edge
    assert edge.rate_limit is not None and edge.burst_limit is not None, "the template throttles every route"
    for method, path, operation in _operations(spec):
        for status, body in THROTTLE_BODY.items():
            _assert_gateway_body(spec, operation["responses"], status, body, f"{method} {path}")


def test_owner_checked_routes_take_x_lease_owner_and_may_answer_forbidden(spec: dict[str, Any]) -> None:
    for method, path, operation in _operations(spec):
        parameters = _resolve(spec, spec["paths"][path].get("parameters", []) + operation.get("parameters", []))
        headers = {parameter["name"] for parameter in parameters if parameter["in"] == "header"}
        owner_checked = (method, path) in OWNER_CHECKED
        assert ("X-Lease-Owner" in headers) == owner_checked, f"{method} {path}"
        assert ("Idempotency-Key" in headers) == ((method, path) == ("POST", "/v1/lease")), f"{method} {path}"
        assert all(not parameter.get("required", False) for parameter in parameters if parameter["in"] == "header")
        # In token and iam modes any authorized route may refuse the caller (an owner not its own, a viewer's
        # change, an unmapped principal), so each documents `forbidden`.
        forbidden = _json_schema(spec, operation["responses"]["403"]) if "403" in operation["responses"] else None
        resolved = _resolve(spec, forbidden or {})
        owner_codes = {code for shape in _alternatives(resolved) for code in _envelope_codes(shape) or ()}
        assert (owner_codes == {"forbidden"}) == (path not in OPEN_PATHS), f"{method} {path}"


# --- statuses and error codes ------------------------------------------------------------------


def test_every_route_documents_the_contract_statuses(spec: dict[str, Any]) -> None:
    for method, path, operation in _operations(spec):
        documented = {int(status) for status in operation["responses"]}
        missing = CONTRACT_STATUSES[(method, path)] - documented
        assert not missing, f"{method} {path} lacks {sorted(missing)}"


def test_error_codes_in_responses_match_the_error_status_mapping(spec: dict[str, Any]) -> None:
    code_status = _code_status()
    seen: set[str] = set()
    for method, path, operation in _operations(spec):
        for status, response in operation["responses"].items():
            schema = _json_schema(spec, response)
            if int(status) < 400:
                continue
            assert schema is not None, f"{method} {path} {status} has no body"
            shapes = [_resolve(spec, shape) for shape in _alternatives(_resolve(spec, schema))]
            envelopes = [codes for shape in shapes if (codes := _envelope_codes(shape)) is not None]
            if int(status) not in GATEWAY_BODIES:
                assert len(envelopes) == len(shapes) == 1, f"{method} {path} {status}: one error envelope"
            for codes in envelopes:
                assert codes, f"{method} {path} {status}: the envelope names its codes"
                for code in codes:
                    assert code in code_status, f"{method} {path} {status}: unknown code {code}"
                    assert code_status[code] == int(status), f"{method} {path}: {code} is {code_status[code]}"
                seen |= codes
    assert {code for _, code in ERROR_STATUS.values()} <= seen, "every mapped error code is documented somewhere"


def test_error_envelope_has_code_message_and_optional_details(spec: dict[str, Any]) -> None:
    body = _resolve(spec, spec["components"]["schemas"]["ErrorBody"])
    assert body["required"] == ["code", "message"]
    assert set(body["properties"]) == {"code", "message", "details"}
    assert body["additionalProperties"] is False
    invalid = _resolve(spec, spec["components"]["schemas"]["InvalidRequestError"])
    details = invalid["properties"]["error"]["allOf"][1]["properties"]["details"]
    assert details["required"] == ["problems"]
    assert details["properties"]["problems"]["items"]["required"] == ["field", "problem"]


# --- the wire models ---------------------------------------------------------------------------


def _schema(spec: dict[str, Any], name: str) -> dict[str, Any]:
    resolved = _resolve(spec, spec["components"]["schemas"][name])
    assert isinstance(resolved, dict)
    return resolved


def test_the_renew_body_is_optional(spec: dict[str, Any]) -> None:
    assert spec["paths"]["/v1/lease/{lease_id}/renew"]["post"]["requestBody"]["required"] is False


def test_a_lease_s_times_are_date_times_and_its_endpoint_a_uri(spec: dict[str, Any]) -> None:
    schema = _schema(spec, "Lease")
    for name in ("created_at", "expires_at"):
        assert schema["properties"][name]["format"] == "date-time"
    assert schema["properties"]["endpoint"]["oneOf"][0]["format"] == "uri"


def test_a_worker_s_logs_are_text(spec: dict[str, Any]) -> None:
    logs = spec["paths"]["/v1/lease/{lease_id}/logs"]["get"]
    assert set(logs["responses"]["200"]["content"]) == {"text/plain"}
