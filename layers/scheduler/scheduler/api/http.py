"""Parsing API Gateway HTTP API events and shaping responses, with every domain error mapped in one place."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import warnings
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from scheduler.callers.model import Caller
from scheduler.errors import (
    BudgetExceeded,
    Conflict,
    Forbidden,
    InvalidRequest,
    LeaseNotFound,
    NoCapacity,
    NotFound,
    OtherOwnersLease,
    OtherOwnersWebhook,
    Preempting,
    ProviderFailed,
    QuotaExceeded,
    SchedulerError,
    StoreUnavailable,
    Unauthorized,
    WorkerLogsGone,
)
from scheduler.inputs import is_text, json_int
from scheduler.models import is_lease_id

logger = Logger(child=True)

# Read-only endpoints publish no metric on most requests; powertools warns about each such flush.
warnings.filterwarnings("ignore", message="No application metrics to publish")

Response = dict[str, Any]

# The one place a domain error becomes an HTTP status and an error code (openapi.yaml, schema Error).
ERROR_STATUS: dict[type[SchedulerError], tuple[int, str]] = {
    InvalidRequest: (400, "invalid_request"),
    Unauthorized: (401, "unauthorized"),
    Forbidden: (403, "forbidden"),
    NotFound: (404, "not_found"),
    Preempting: (409, "preempting"),  # before Conflict: the first class a refusal is an instance of decides
    Conflict: (409, "conflict"),
    WorkerLogsGone: (410, "gone"),
    QuotaExceeded: (429, "quota_exceeded"),
    BudgetExceeded: (429, "budget_exceeded"),
    ProviderFailed: (502, "provider_error"),
    NoCapacity: (503, "no_capacity"),
    StoreUnavailable: (503, "no_capacity"),
}

MAX_BODY_BYTES = 256 * 1024
# Integers longer than Python converts are read as a LongNumber, which validation names, not as "not JSON".
_JSON = json.JSONDecoder(parse_int=json_int)


_BOOL_WORDS = {"true": True, "t": True, "yes": True, "y": True, "on": True, "1": True}
_BOOL_WORDS |= {"false": False, "f": False, "no": False, "n": False, "off": False, "0": False}


class MalformedEvent(ValueError):
    """The event is no API Gateway HTTP API (payload format 2.0) event."""


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise MalformedEvent(f"{name} is not a string")
    return value


def _texts(event: dict[str, Any], name: str) -> dict[str, str]:
    """A map of strings (headers, path or query parameters); absent: empty. A lone surrogate is no text
    DynamoDB, a header or a log line can carry: refused here (400), before it reaches a filter
    expression or a condition."""
    values = event.get(name, {})
    if not isinstance(values, dict):
        raise MalformedEvent(f"{name} is not an object")
    for key, value in values.items():
        for text in (_text(key, name), _text(value, name)):
            if not is_text(text):
                raise MalformedEvent("a header, path or query value is not valid Unicode text")
    return values


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _BOOL_WORDS:
        return _BOOL_WORDS[value.lower()]
    raise MalformedEvent("isBase64Encoded is not a boolean")


class HttpRequest:
    """The parts of an HTTP API (payload format 2.0) event the handlers read (a plain class: every HTTP
    function builds this class at its cold start, and a dataclass would compile its methods there)."""

    __slots__ = (
        "_caller",
        "authorizer",
        "body",
        "headers",
        "isBase64Encoded",
        "pathParameters",
        "queryStringParameters",
        "rawPath",
        "request_id",
        "routeKey",
    )

    def __init__(
        self,
        *,
        route_key: str = "",
        raw_path: str = "",
        headers: dict[str, str] | None = None,
        path_parameters: dict[str, str] | None = None,
        query_parameters: dict[str, str] | None = None,
        body: str | None = None,
        is_base64: bool = False,
        request_id: str = "",
        authorizer: dict[str, Any] | None = None,
    ) -> None:
        self.authorizer: dict[str, Any] = authorizer or {}  # requestContext.authorizer: what API Gateway established
        self._caller: Caller | None = None
        self.routeKey = route_key
        self.rawPath = raw_path
        self.headers: dict[str, str] = headers or {}
        self.pathParameters: dict[str, str] = path_parameters or {}
        self.queryStringParameters: dict[str, str] = query_parameters or {}
        self.body = body
        self.isBase64Encoded = is_base64
        self.request_id = request_id

    @classmethod
    def of_event(cls, event: object) -> HttpRequest:
        """The request in `event`; MalformedEvent when it is no HTTP API payload 2.0 event."""
        if not isinstance(event, dict):
            raise MalformedEvent("the event is not an object")
        context = event.get("requestContext", {})
        if not isinstance(context, dict):
            raise MalformedEvent("requestContext is not an object")
        http = context.get("http", {})
        if not isinstance(http, dict):
            raise MalformedEvent("requestContext.http is not an object")
        for name in ("method", "path"):
            _text(http.get(name, ""), f"requestContext.http.{name}")
        authorizer = context.get("authorizer") or {}
        if not isinstance(authorizer, dict):
            raise MalformedEvent("requestContext.authorizer is not an object")
        body = event.get("body")
        return cls(
            route_key=_text(event.get("routeKey", ""), "routeKey"),
            raw_path=_text(event.get("rawPath", ""), "rawPath"),
            headers=_texts(event, "headers"),
            path_parameters=_texts(event, "pathParameters"),
            query_parameters=_texts(event, "queryStringParameters"),
            body=None if body is None else _text(body, "body"),
            is_base64=_flag(event.get("isBase64Encoded", False)),
            request_id=_text(context.get("requestId", ""), "requestContext.requestId"),
            authorizer=authorizer,
        )

    @property
    def caller(self) -> Caller:
        """Who is calling, as the edge (`http_endpoint`) established it before the handler ran."""
        if self._caller is None:
            raise RuntimeError("the caller is established by http_endpoint, which did not run")
        return self._caller

    def header(self, name: str) -> str | None:
        """A header by name, case-insensitively (API Gateway lower-cases them, clients may not)."""
        wanted = name.lower()
        return next((value for key, value in self.headers.items() if key.lower() == wanted), None)

    def path_parameter(self, name: str) -> str:
        """A path parameter the route guarantees."""
        value = self.pathParameters.get(name, "")
        if not value:
            raise InvalidRequest(f"missing path parameter {name}")
        return value

    def lease_id(self) -> str:
        """The `{lease_id}` path parameter; a value that is no lease id names no lease (404)."""
        value = self.path_parameter("lease_id")
        if not is_lease_id(value):
            raise LeaseNotFound(f"lease {value[:64]} not found")
        return value

    def json_body(self, *, required: bool = True) -> object:
        """The body's JSON value (an absent body, when not required: `{}`); InvalidRequest when it is no JSON."""
        raw = self._raw_body()
        if not raw.strip():
            if required:
                raise InvalidRequest("request body must be a JSON object")
            raw = b"{}"
        try:
            return _JSON.decode(_utf8(raw))
        except (ValueError, RecursionError) as error:
            raise InvalidRequest("request body is not valid JSON (or nested too deeply)") from error

    def _raw_body(self) -> bytes:
        if self.body is None:
            return b""
        if self.isBase64Encoded:
            try:
                raw = base64.b64decode(self.body, validate=True)
            except (binascii.Error, ValueError) as error:
                raise InvalidRequest("request body is not valid base64") from error
        elif is_text(self.body):
            raw = self.body.encode()
        else:
            raise InvalidRequest("request body is not valid UTF-8")  # a lone surrogate no encoder can write
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidRequest(f"request body is larger than {MAX_BODY_BYTES} bytes")
        return raw


def _utf8(raw: bytes) -> str:
    """The body as text: JSON between systems is UTF-8 without a byte order mark (RFC 8259 §8.1). `json.loads`
    of bytes would take UTF-16 and UTF-32 too, and a BOM: each is refused here, named."""
    encoding = json.detect_encoding(raw)
    if encoding == "utf-8-sig":
        raise InvalidRequest("request body must be UTF-8 without a byte order mark (RFC 8259)")
    if encoding != "utf-8":
        raise InvalidRequest(f"request body must be UTF-8 (RFC 8259), not {encoding.upper()}")
    try:
        return raw.decode()
    except UnicodeDecodeError as error:
        raise InvalidRequest("request body is not valid UTF-8") from error


def json_response(status: int, body: object | None = None) -> Response:
    """An API Gateway response with a JSON body (none for 204)."""
    response: Response = {"statusCode": status, "headers": {"Content-Type": "application/json"}}
    if body is not None:
        response["body"] = json.dumps(body, separators=(",", ":"))
    return response


def error_status(error: SchedulerError) -> tuple[int, str]:
    """The HTTP status and error code of a domain error (500 `internal_error` for one the table lacks)."""
    return next((mapped for kind, mapped in ERROR_STATUS.items() if isinstance(error, kind)), (500, "internal_error"))


def text_response(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    """An API Gateway response with a plain-text (UTF-8) body."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "text/plain; charset=utf-8", **(headers or {})},
        "body": text,
    }


def error_response(error: SchedulerError) -> Response:
    """The contract's error body for a domain error."""
    status, code = error_status(error)
    payload: dict[str, object] = {"code": code, "message": error.message}
    if error.details:
        payload["details"] = error.details
    return json_response(status, {"error": payload})


def http_endpoint(handler: Callable[[HttpRequest, Any], Response]) -> Callable[[dict[str, Any], Any], Response]:
    """Turn the event into an HttpRequest, establish who is calling, and turn every error into the contract's
    error body.

    The caller is established before the handler runs (a credential refused is a 401 whatever the request),
    with the handler module's `runtime` (its settings say the AUTH_MODE; in iam mode its registry maps the
    principal), so that a test's runtime is the one the edge uses too. Every refused authorization — a 401, a
    403, another owner's lease answered 404 — is one structured log line and an `AuthRefused` metric.
    """

    @functools.wraps(handler)
    def wrapper(event: dict[str, Any], context: Any) -> Response:
        try:
            request = HttpRequest.of_event(event)
        except MalformedEvent as error:
            logger.info("request refused: not a well-formed HTTP API payload 2.0 event", extra={"error": str(error)})
            return json_response(400, {"error": {"code": "invalid_request", "message": "malformed request"}})
        # Every line of the request carries API Gateway's request id (callers quote it in bug reports).
        logger.append_keys(request_id=request.request_id or None)
        runtime = handler.__globals__["runtime"]
        try:
            request._caller = runtime.identity.caller(request.authorizer)
            return handler(request, context)
        except SchedulerError as error:
            response = error_response(error)
            if isinstance(error, Unauthorized | Forbidden | OtherOwnersLease | OtherOwnersWebhook):
                auth_refused(runtime, request, error, response["statusCode"])
            else:
                logger.info("request refused", extra={"status": response["statusCode"], "reason": error.message})
            return response
        except Exception:
            # Never a stack trace to the caller; the log line has it, under the request id.
            logger.exception("unexpected error")
            return json_response(
                500,
                {"error": {"code": "internal_error", "message": "internal error; the request id is in the logs"}},
            )

    return wrapper


def auth_refused(runtime: Any, request: HttpRequest, error: SchedulerError, status: int) -> None:
    """The one log line (never a credential) and the AuthRefused metric of a refused authorization."""
    from scheduler.observability.metrics import count

    reason = getattr(error, "reason", error.message)
    identified = request._caller
    caller = identified.name if identified is not None else _principal(request) or "unknown credential"
    lease_id = request.pathParameters.get("lease_id")
    logger.warning(
        "authorization refused",
        extra={"caller": caller, "route": request.routeKey, "lease_id": lease_id, "reason": reason, "status": status},
    )
    count(runtime.metrics, "AuthRefused", status=str(status))


def _principal(request: HttpRequest) -> str | None:
    iam = request.authorizer.get("iam")
    arn = iam.get("userArn") if isinstance(iam, dict) else None
    return arn if isinstance(arn, str) else None
