"""Lambda REQUEST authorizer (HTTP API, simple responses).

AUTH_MODE=secret: X-Internal-Secret against the shared secret. API Gateway answers 401 itself when the header is
missing (it is the identity source), and 403 when this function says no.
AUTH_MODE=token: `Authorization: Bearer <token>` looked up in the callers registry (one read; API Gateway caches
the answer AUTH_CACHE_SECONDS per token). Every request is let through with its caller, or its refusal, in the
context, and the function's edge answers a refusal 401 (`scheduler/api/token_authorizer.py` says why).
"""

import hmac
from typing import Any

from scheduler.api.token_authorizer import authorize_token
from scheduler.errors import ConfigurationError
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment()
if runtime.settings.auth_mode == "token":
    runtime.warm("callers")


def _secret(arn: str | None, local: Any) -> bytes | None:
    """A secret from Secrets Manager (AWS: cached five minutes, so a rotated one takes effect without a
    redeploy), else its local-only value."""
    if arn:
        from aws_lambda_powertools.utilities import parameters

        return str(parameters.get_secret(arn, max_age=300)).encode()
    return local.get_secret_value().encode() if local is not None else None


def expected_secret() -> bytes:
    """INTERNAL_SECRET_ARN's secret (AWS), else INTERNAL_SECRET (local)."""
    settings = runtime.settings
    secret = _secret(settings.internal_secret_arn, settings.internal_secret)
    if secret is None:
        raise ConfigurationError("neither INTERNAL_SECRET_ARN nor INTERNAL_SECRET is set")
    return secret


def bootstrap_token() -> bytes | None:
    """BOOTSTRAP_TOKEN_SECRET_ARN's token (AWS), else BOOTSTRAP_TOKEN (local); None when neither is set."""
    return _secret(runtime.settings.bootstrap_token_secret_arn, runtime.settings.bootstrap_token)


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Token mode: always authorized, the caller or the refusal in the context. Secret mode: authorized when
    the header equals the secret, compared in constant time."""
    headers = {key.lower(): value for key, value in (event.get("headers") or {}).items()}
    if runtime.settings.auth_mode == "token":
        now = int(runtime.clock().timestamp())
        return {
            "isAuthorized": True,
            "context": authorize_token(headers.get("authorization"), lambda: runtime.callers, bootstrap_token, now),
        }
    provided = str(headers.get("x-internal-secret", "")).encode()
    authorized = bool(provided) and hmac.compare_digest(provided, expected_secret())
    if not authorized:
        logger.info("request refused by authorizer", extra={"route": event.get("routeKey")})
    return {"isAuthorized": authorized}
