"""The HTTP edge: API Gateway (HTTP API, payload 2.0) events in, API Gateway responses out.

Only handlers use this package; the domain never sees an API Gateway event.
"""
