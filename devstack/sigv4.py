"""Verifying AWS Signature Version 4 as API Gateway does for a route with AWS_IAM authorization (AUTH_MODE=iam).

The request's signature is computed again from what was received — the method, the path, the query, the headers
named in `SignedHeaders` and the body's SHA-256 — with the secret key of the access key it names (from
LOCAL_IAM_PRINCIPALS), and compared in constant time. The credential scope must name the service `execute-api`
and the API's region, and the request time (`X-Amz-Date`) must be within 5 minutes of now. Headers the client did
not sign may change in transit; a signed one may not, and neither may the body.

A refusal is API Gateway's own 403 with its message (`Refusal`); a verified request's principal is what API
Gateway hands the function as `requestContext.authorizer.iam`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, quote

from scheduler.errors import ConfigurationError

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "execute-api"
MAX_SKEW = timedelta(minutes=5)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_PARAMETER = re.compile(r"[ \t]*(Credential|SignedHeaders|Signature)=([^, \t]*)[ \t]*")

# API Gateway's own messages (its 403 body is {"message": ...}).
FORBIDDEN = "Forbidden"
INVALID_TOKEN = "The security token included in the request is invalid."  # noqa: S105  # nosec B105 - a message
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access"
    " Key and signing method. Consult the service documentation for details."
)


class Principal(NamedTuple):
    """An IAM identity the local stack knows the secret key of (LOCAL_IAM_PRINCIPALS)."""

    access_key_id: str
    secret_access_key: str
    arn: str
    session_token: str | None = None

    def context(self) -> dict[str, Any]:
        """`requestContext.authorizer.iam` as API Gateway writes it for this principal."""
        account = self.arn.split(":")[4]
        unique = "AIDA" + hashlib.sha256(self.arn.encode()).hexdigest()[:17].upper()
        if ":assumed-role/" in self.arn:
            unique = "AROA" + unique[4:] + ":" + self.arn.rsplit("/", 1)[1]
        return {
            "accessKey": self.access_key_id,
            "accountId": account,
            "callerId": unique,
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": self.arn,
            "userId": unique,
        }


class Refusal(Exception):
    """The request is refused as API Gateway refuses it: 403 with this message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SignedRequest(NamedTuple):
    """What the gateway received, as the signature covers it."""

    method: str
    path: str  # as sent, percent-encoded
    query: str  # as sent
    headers: list[tuple[str, str]]  # every header, in order, repeated names kept
    body: bytes


def parse_principals(raw: str) -> dict[str, Principal]:
    """LOCAL_IAM_PRINCIPALS: a JSON list of {"access_key_id", "secret_access_key", "arn", "session_token"?}."""
    try:
        entries = json.loads(raw)
        if not isinstance(entries, list):
            raise ValueError("not a JSON list")
        found = {}
        for entry in entries:
            if not isinstance(entry, dict) or not {"access_key_id", "secret_access_key", "arn"} <= set(entry):
                raise ValueError('each entry needs "access_key_id", "secret_access_key" and "arn"')
            unknown = set(entry) - {"access_key_id", "secret_access_key", "arn", "session_token"}
            if unknown:
                raise ValueError(f"unknown key {sorted(unknown)[0]!r}")
            if not all(isinstance(value, str) and value for value in entry.values()):
                raise ValueError("each value must be a non-empty string")
            if not re.fullmatch(r"arn:aws(-[a-z]+)*:(iam|sts)::[0-9]{12}:[!-~]+", entry["arn"]):
                raise ValueError(f"{entry['arn']!r} is no IAM or STS ARN")
            found[entry["access_key_id"]] = Principal(**entry)
        return found
    except ValueError as error:
        raise ConfigurationError(f"invalid configuration: LOCAL_IAM_PRINCIPALS: {error}") from None


def verify(
    request: SignedRequest,
    principals: Mapping[str, Principal],
    region: str,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Principal:
    """The principal that signed `request`; Refusal as API Gateway answers otherwise."""
    headers: dict[str, list[str]] = {}
    for name, value in request.headers:
        headers.setdefault(name.lower(), []).append(value)
    authorization = headers.get("authorization", [""])[0]
    if not authorization:
        raise Refusal(FORBIDDEN)
    scheme, _, rest = authorization.partition(" ")
    fields: dict[str, str] = {}
    for part in rest.split(",") if scheme == ALGORITHM else ():
        found = _PARAMETER.fullmatch(part)
        if found is not None:
            fields[found.group(1)] = found.group(2)
    for name in ("Credential", "SignedHeaders", "Signature"):
        if not fields.get(name):
            raise Refusal(f"Authorization header requires '{name}' parameter.")
    key_id, _, scope = fields["Credential"].partition("/")
    scope_parts = scope.split("/")
    if len(scope_parts) != 4 or scope_parts[3] != "aws4_request":
        raise Refusal("Credential should be scoped to a valid region.")
    day, scoped_region, service, _ = scope_parts
    if service != SERVICE:
        raise Refusal(f"Credential should be scoped to correct service: '{SERVICE}'.")
    if scoped_region != region:
        raise Refusal("Credential should be scoped to a valid region.")
    principal = principals.get(key_id)
    if principal is None:
        raise Refusal(INVALID_TOKEN)
    token = headers.get("x-amz-security-token", [None])[0]
    if token != principal.session_token:
        raise Refusal(INVALID_TOKEN)
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed or (token is not None and "x-amz-security-token" not in signed):
        raise Refusal(MISMATCH)
    stamp = headers.get("x-amz-date", [""])[0]
    try:
        when = datetime.strptime(stamp, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        raise Refusal("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.") from None
    current = now()
    if abs(current - when) > MAX_SKEW:
        earliest = (current - MAX_SKEW).strftime(_AMZ_DATE)
        raise Refusal(
            f"Signature expired: {stamp} is now earlier than {earliest} ({current.strftime(_AMZ_DATE)} - 5 min.)"
        )
    if day != stamp[:8]:
        raise Refusal(MISMATCH)
    expected = signature(request, headers, signed, principal.secret_access_key, scope, stamp)
    if not hmac.compare_digest(expected, fields["Signature"]):
        raise Refusal(MISMATCH)
    return principal


def signature(
    request: SignedRequest, headers: Mapping[str, list[str]], signed: list[str], secret: str, scope: str, stamp: str
) -> str:
    """The signature of `request` over the headers `signed`, as SigV4 defines it."""
    canonical = "\n".join(
        (
            request.method.upper(),
            quote(_remove_dot_segments(request.path), safe="/~"),
            _canonical_query(request.query),
            "".join(
                f"{name}:{','.join(' '.join(value.split()) for value in headers.get(name, []))}\n" for name in signed
            ),
            ";".join(signed),
            hashlib.sha256(request.body).hexdigest(),
        )
    )
    to_sign = "\n".join((ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()))
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    encoded = sorted((quote(key, safe="-_.~"), quote(value, safe="-_.~")) for key, value in pairs)
    return "&".join(f"{key}={value}" for key, value in encoded)


def _remove_dot_segments(path: str) -> str:
    """The path as SigV4 signers normalise it before signing: `.` and `..` resolved, empty segments dropped."""
    output: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if output:
                output.pop()
        elif segment and segment != ".":
            output.append(segment)
    trailing = "/" if path.endswith("/") and output else ""
    return "/" + "/".join(output) + trailing if path.startswith("/") or not path else "/".join(output) + trailing
