"""A local API Gateway HTTP API: routes from the template, payload 2.0 events, each route's authorization.

It answers the way API Gateway does: 404 `{"message":"Not Found"}` for an unknown route, 401
`{"message":"Unauthorized"}` when a Lambda authorizer's identity header is missing, 403 `{"message":"Forbidden"}`
when the authorizer says no, 403 with API Gateway's own message when an AWS_IAM route's SigV4 signature does not
verify (`sigv4.py`), 500 `{"message":"Internal Server Error"}` on a function error and 503
`{"message":"Service Unavailable"}` on a timeout.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from devstack.lambdas import FunctionError, LocalLambda
from devstack.sigv4 import Principal, Refusal, SignedRequest, verify
from devstack.template import AuthorizerSpec, RouteSpec, SamTemplate

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
REGION = "us-east-1"
_ROUTE_ARN_PREFIX = f"arn:aws:execute-api:{REGION}:000000000000:local/$default/"
_TEXT_TYPES = ("text/", "json", "xml", "javascript", "x-www-form-urlencoded")


class _AuthorizerCache:
    """Authorizer results cached by authorizer and identity source, for each authorizer's ReauthorizeEvery."""

    def __init__(self) -> None:
        self._results: dict[tuple[str, ...], tuple[float, bool, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> tuple[bool, dict[str, Any]] | None:
        with self._lock:
            cached = self._results.get(key)
            if cached is None or cached[0] < time.monotonic():
                return None
            return cached[1], cached[2]

    def put(self, key: tuple[str, ...], ttl_seconds: int, allowed: bool, context: dict[str, Any]) -> None:
        if ttl_seconds > 0:
            with self._lock:
                self._results[key] = (time.monotonic() + ttl_seconds, allowed, context)


class _TokenBucket:
    """API Gateway's per-route throttle: `rate` requests a second, bursts up to `burst`."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def admit(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


class LocalHttpApi(ThreadingHTTPServer):
    """The HTTP API on a loopback port."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        template: SamTemplate,
        lambdas: LocalLambda,
        principals: dict[str, Principal] | None = None,
    ) -> None:
        """`principals`: the IAM identities whose SigV4 signatures verify (LOCAL_IAM_PRINCIPALS), by access key."""
        super().__init__(address, _Handler)
        self.template = template
        self.lambdas = lambdas
        self.principals = principals or {}
        self.authorizer_cache = _AuthorizerCache()
        self.api_id = "local"
        edge = template.edge
        self.throttles: dict[str, _TokenBucket] = {}
        if edge.rate_limit is not None and edge.burst_limit is not None:
            self.throttles = {
                route.route_key: _TokenBucket(edge.rate_limit, edge.burst_limit) for route in template.routes
            }


class _Handler(BaseHTTPRequestHandler):
    server: LocalHttpApi
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_OPTIONS(self) -> None:
        edge = self.server.template.edge
        origin = self.headers.get("Origin")
        if not edge.cors_origins:
            self._send(HTTPStatus.NOT_FOUND, {"message": "Not Found"}, "")
            return
        # A CORS preflight, answered by API Gateway itself: allowed origins get the allow headers.
        self.send_response(HTTPStatus.NO_CONTENT)
        if origin and self._origin_allowed(origin):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", ",".join(edge.cors_methods))
            self.send_header("Access-Control-Allow-Headers", ",".join(header.lower() for header in edge.cors_headers))
            self.send_header("Access-Control-Max-Age", str(edge.cors_max_age))
            self.send_header("Vary", "Origin")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _origin_allowed(self, origin: str) -> bool:
        allowed = self.server.template.edge.cors_origins
        return "*" in allowed or origin in allowed

    def end_headers(self) -> None:
        origin = self.headers.get("Origin") if self.command != "OPTIONS" else None
        if origin and self.server.template.edge.cors_origins and self._origin_allowed(origin):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Vary", "Origin")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the functions' own logs are the access log

    def _serve(self) -> None:
        request_id = base64.b64encode(secrets.token_bytes(12)).decode()[:15] + "="
        declared = self.headers.get("Content-Length") or "0"
        if not (declared.isascii() and declared.isdigit()):  # int() takes -1 (read to EOF: a hang), ٣ and 1_0
            self._send(HTTPStatus.BAD_REQUEST, {"message": "Bad Request"}, request_id)
            self.close_connection = True  # where the body ends is unknown
            return
        length = int(declared)
        if length > MAX_PAYLOAD_BYTES:
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"message": "Request Entity Too Large"}, request_id)
            return
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        found = self.server.template.route_for(self.command, url.path)
        if found is None:
            self._send(HTTPStatus.NOT_FOUND, {"message": "Not Found"}, request_id)
            return
        route, path_parameters = found
        throttle = self.server.throttles.get(route.route_key)
        if throttle is not None and not throttle.admit():
            self._send(HTTPStatus.TOO_MANY_REQUESTS, {"message": "Too Many Requests"}, request_id)
            return
        event = self._event(route, path_parameters, url.path, url.query, body, request_id)
        if route.authorized:
            signed = SignedRequest(self.command, url.path, url.query, list(self.headers.items()), body)
            refusal = self._authorize(route, event, signed)
            if refusal is not None:
                self._send(refusal[0], refusal[1], request_id)
                if refusal[0] in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
                    _gateway_refused(route.route_key, int(refusal[0]), refusal[1]["message"], request_id)
                return
        try:
            result = self.server.lambdas.invoke(route.function, event, request_id)
        except FunctionError as error:
            if error.kind == "timeout":
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "Service Unavailable"}, request_id)
            else:
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal Server Error"}, request_id)
            return
        self._send_lambda_result(result, request_id)

    def _event(
        self, route: RouteSpec, path_parameters: dict[str, str], path: str, query: str, body: bytes, request_id: str
    ) -> dict[str, Any]:
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        query_parameters: dict[str, str] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            query_parameters[name] = f"{query_parameters[name]},{value}" if name in query_parameters else value
        now = datetime.now(UTC)
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route.route_key,
            "rawPath": path,
            "rawQueryString": query,
            "headers": headers,
            "requestContext": {
                "accountId": "000000000000",
                "apiId": self.server.api_id,
                "domainName": headers.get("host", "127.0.0.1"),
                "domainPrefix": "127",
                "http": {
                    "method": self.command,
                    "path": path,
                    "protocol": self.request_version,
                    "sourceIp": self.client_address[0],
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": request_id,
                "routeKey": route.route_key,
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "isBase64Encoded": False,
        }
        if query_parameters:
            event["queryStringParameters"] = query_parameters
        if path_parameters:
            event["pathParameters"] = path_parameters
        if body:
            content_type = headers.get("content-type", "").lower()
            try:
                if not any(kind in content_type for kind in _TEXT_TYPES):
                    raise UnicodeDecodeError("utf-8", body, 0, 0, "binary content type")
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"] = base64.b64encode(body).decode()
                event["isBase64Encoded"] = True
        return event

    def _authorize(
        self, route: RouteSpec, event: dict[str, Any], signed: SignedRequest
    ) -> tuple[HTTPStatus, dict[str, str]] | None:
        if route.auth == "AWS_IAM":
            try:
                principal = verify(signed, self.server.principals, REGION)
            except Refusal as refused:
                return HTTPStatus.FORBIDDEN, {"message": refused.message}
            event["requestContext"]["authorizer"] = {"iam": principal.context()}
            return None
        return self._lambda_authorizer(self.server.template.authorizers[route.auth], route.auth, event)

    def _lambda_authorizer(
        self, spec: AuthorizerSpec, name: str, event: dict[str, Any]
    ) -> tuple[HTTPStatus, dict[str, str]] | None:
        identity = tuple(event["headers"].get(header.lower(), "") for header in spec.identity_headers)
        if not all(identity):
            return HTTPStatus.UNAUTHORIZED, {"message": "Unauthorized"}
        cached = self.server.authorizer_cache.get((name, *identity))
        if cached is None:
            authorizer_event = {
                **{key: value for key, value in event.items() if key not in ("body", "isBase64Encoded")},
                "type": "REQUEST",
                "routeArn": f"{_ROUTE_ARN_PREFIX}{event['routeKey'].replace(' ', '')}",
                "identitySource": list(identity),
            }
            try:
                result = self.server.lambdas.invoke(spec.function, authorizer_event)
            except FunctionError:
                return HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal Server Error"}
            allowed = bool(isinstance(result, dict) and result.get("isAuthorized") is True)
            context = result.get("context") or {} if isinstance(result, dict) else {}
            self.server.authorizer_cache.put((name, *identity), spec.ttl_seconds, allowed, context)
            cached = (allowed, context)
        allowed, context = cached
        if not allowed:
            return HTTPStatus.FORBIDDEN, {"message": "Forbidden"}
        event["requestContext"]["authorizer"] = {"lambda": context}
        return None

    def _send_lambda_result(self, result: Any, request_id: str) -> None:
        # Payload 2.0: a result without statusCode is taken as a 200 JSON body, as API Gateway does.
        if not (isinstance(result, dict) and "statusCode" in result):
            self._send(HTTPStatus.OK, result, request_id)
            return
        body = result.get("body") or ""
        raw = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
        self.send_response(int(result["statusCode"]))
        headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
        for name, value in headers.items():
            self.send_header(name, value)
        for cookie in result.get("cookies") or []:
            self.send_header("Set-Cookie", cookie)
        self.send_header("apigw-requestid", request_id)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _send(self, status: int, body: Any, request_id: str) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("apigw-requestid", request_id)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _gateway_refused(route: str, status: int, reason: str, request_id: str) -> None:
    """What CloudWatch makes of a request API Gateway refused before any function ran (template.yaml: the access
    log line, and the GatewayAuthRefused metric its filter counts), printed as the stack prints every function's."""
    line = {"message": "authorization refused at the gateway", "route": route, "status": status, "reason": reason}
    line["request_id"] = request_id
    document = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [[]], "Metrics": [{"Name": METRIC}]}],
        },
        METRIC: 1,
    }
    with _PRINT_LOCK:
        print(f"[gateway] {json.dumps(line)}", flush=True)
        print(f"[gateway] {json.dumps(document)}", flush=True)


NAMESPACE, METRIC = "OpenAliceScheduler", "GatewayAuthRefused"
_PRINT_LOCK = threading.Lock()
