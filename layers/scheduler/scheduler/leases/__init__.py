"""The use cases: what the functions do with leases, each in its own module, returning result values.

Each takes one `context.Context` (store, providers, settings, limits, clock, deadline) first.
acquire · reads (get, list) · renew · release · release_all · sweep (a scheduled run's passes) · ttl_stream ·
liveness (stopped workers) · readiness · reconcile · logs · usage · workers (verified removal, shared by every
end) · outcomes (the result types).
"""
