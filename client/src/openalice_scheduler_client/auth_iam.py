"""AUTH_MODE=iam: every request signed with AWS Signature Version 4 for API Gateway (service `execute-api`).

The credentials come from botocore's default chain, as the AWS CLI finds them: the environment
(`AWS_ACCESS_KEY_ID`, ...), the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, default
`~/.aws/credentials`), a profile (`profile=` or `AWS_PROFILE`; assumed roles, SSO), a container or instance role.
Refreshable credentials are read afresh for each signature. The region is, first found: `region=`, the one in an
`execute-api` URL, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`.

Each attempt of a request is signed when it is sent (a retry gets a new `X-Amz-Date`), over the method, the path,
the query exactly as sent, the body's SHA-256 and every header but those a proxy or the HTTP library may set or
change on the way. Imported only for `auth="iam"`: botocore is the client's `iam` extra, not a dependency.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError
from requests import PreparedRequest

from .credentials import Credential, CredentialError

SERVICE = "execute-api"
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z]{2}(?:-[a-z]+)+-[0-9]+)\.amazonaws\.com(?:\.cn)?\Z")
# Hop-by-hop and framing headers, and those an HTTP library sets on its own: not signed (botocore's own list
# varies with its version; the signature must not depend on it).
UNSIGNED = frozenset(
    {
        "accept-encoding",
        "authorization",
        "connection",
        "content-length",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amz-date",
        "x-amz-security-token",
    }
)


def region_in_url(url: str) -> str | None:
    """The region an API Gateway URL names (`https://<api>.execute-api.<region>.amazonaws.com`), if it names one."""
    found = _EXECUTE_API_HOST.search(urlsplit(url).hostname or "")
    return found.group(1) if found else None


class SigV4Signer(Credential):
    """Signs each request as the AWS principal of botocore's default credential chain (or of `profile`)."""

    mode = "iam"

    def __init__(self, url: str, *, region: str | None = None, profile: str | None = None) -> None:
        try:
            session = botocore.session.Session(profile=profile)
            credentials = session.get_credentials()
            configured = session.get_config_variable("region")
        except BotoCoreError as error:  # an unknown profile, a malformed config file: its message names no secret
            raise CredentialError(f"auth='iam': {error}") from None
        if credentials is None:
            raise CredentialError(
                "auth='iam' found no AWS credentials (environment variables, shared credentials file"
                f"{f', profile {profile!r}' if profile else ''}, container or instance role)"
            )
        self.region = (
            region
            or region_in_url(url)
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or configured
        )
        if not self.region:
            raise CredentialError(
                "auth='iam' needs the API's region: pass region= (leasectl --region), use the API's execute-api "
                "URL, or set AWS_REGION"
            )
        self.profile = profile
        self._credentials: Any = credentials

    @property
    def present(self) -> bool:
        return True

    def __call__(self, request: PreparedRequest) -> PreparedRequest:
        signed = {name: value for name, value in request.headers.items() if name.lower() not in UNSIGNED}
        body = request.body or b""
        aws = AWSRequest(
            method=request.method,
            url=request.url,
            data=body.encode() if isinstance(body, str) else body,
            headers=signed,
        )
        SigV4Auth(self._credentials.get_frozen_credentials(), SERVICE, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name] = value
        return request

    def __repr__(self) -> str:
        return f"SigV4Signer(region={self.region!r}, profile={self.profile!r})"
