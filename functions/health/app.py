"""GET /health — liveness for load balancers and probes.

Standard library only: it must cold-start within a few ms of bare Python, so no AWS SDK and no
powertools (API Gateway access logs and Lambda's own metrics cover it).
"""

import json
from typing import Any

_RESPONSE = {
    "statusCode": 200,
    "headers": {"Content-Type": "application/json"},
    "body": json.dumps({"status": "ok", "service": "openalice-scheduler"}, separators=(",", ":")),
}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Always 200 while the function can run."""
    return _RESPONSE
