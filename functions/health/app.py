"""GET /health — liveness for load balancers and probes.

Nothing imported at all (not even json or typing): it must cold-start within a few ms of bare
Python, so no AWS SDK and no powertools (API Gateway access logs and Lambda's own metrics cover it).
"""

_RESPONSE = {
    "statusCode": 200,
    "headers": {"Content-Type": "application/json"},
    "body": '{"status":"ok","service":"openalice-scheduler"}',
}


def lambda_handler(event: dict[str, object], context: object) -> dict[str, object]:
    """Always 200 while the function can run."""
    return _RESPONSE
