"""Lifecycle events: one per lease transition, produced from the leases table's stream (`producer`), numbered
in the lease's history (`store/history.py`), published on the stack's EventBridge bus and handed to the owners'
webhooks (`publish`). Pure and cheap to import but for `publish`, which only the events function loads.
"""
