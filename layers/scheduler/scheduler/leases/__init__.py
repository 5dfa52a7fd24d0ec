"""The use cases: what the functions do with leases, each in its own module, returning result values.

acquire · reads (get, list) · renew · release · sweep · ttl_stream · liveness (stopped workers) ·
reconcile · workers (verified removal, shared by every end) · outcomes (the result types).
"""
