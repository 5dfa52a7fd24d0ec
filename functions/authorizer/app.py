"""Lambda REQUEST authorizer (HTTP API, simple responses): X-Internal-Secret against the shared secret.

API Gateway answers 401 itself when the header is missing (it is the identity source), and 403
when this function says no.
"""

import hmac
from typing import Any

from aws_lambda_powertools import Logger

from scheduler.errors import ConfigurationError
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment()


def expected_secret() -> bytes:
    """INTERNAL_SECRET_ARN's secret (AWS), else INTERNAL_SECRET (local)."""
    settings = runtime.settings
    if settings.internal_secret_arn:
        from aws_lambda_powertools.utilities import parameters

        # Cached for five minutes: a rotated secret takes effect within that, without a redeploy.
        return str(parameters.get_secret(settings.internal_secret_arn, max_age=300)).encode()
    if settings.internal_secret is None:
        raise ConfigurationError("neither INTERNAL_SECRET_ARN nor INTERNAL_SECRET is set")
    return settings.internal_secret.get_secret_value().encode()


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, bool]:
    """Authorize when the header equals the secret, compared in constant time."""
    headers = {key.lower(): value for key, value in (event.get("headers") or {}).items()}
    provided = str(headers.get("x-internal-secret", "")).encode()
    authorized = bool(provided) and hmac.compare_digest(provided, expected_secret())
    if not authorized:
        logger.info("request refused by authorizer", extra={"route": event.get("routeKey")})
    return {"isAuthorized": authorized}
