"""Lambda REQUEST authorizer (HTTP API, simple responses): X-Internal-Secret against the shared secret.

API Gateway answers 401 itself when the header is missing (it is the identity source), and 403
when this function says no.
"""

import hmac
import os
from typing import Any

from aws_lambda_powertools import Logger

logger = Logger()
_SECRET_ARN = os.environ.get("INTERNAL_SECRET_ARN", "")


def _expected_secret() -> bytes:
    if _SECRET_ARN:
        from aws_lambda_powertools.utilities import parameters

        # Cached for five minutes: a rotated secret takes effect within that, without a redeploy.
        return str(parameters.get_secret(_SECRET_ARN, max_age=300)).encode()
    return os.environ["INTERNAL_SECRET"].encode()


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, bool]:
    """Authorize when the header equals the secret, compared in constant time."""
    headers = {key.lower(): value for key, value in (event.get("headers") or {}).items()}
    provided = str(headers.get("x-internal-secret", "")).encode()
    authorized = bool(provided) and hmac.compare_digest(provided, _expected_secret())
    if not authorized:
        logger.info("request refused by authorizer", extra={"route": event.get("routeKey")})
    return {"isAuthorized": authorized}
