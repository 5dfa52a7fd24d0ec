"""The wire contract: generated from openapi.yaml by scripts/wire_contract.py (`make contract`); do not edit.

Every rule of every request (each JSON body's properties, each operation's query parameters, the request headers)
and the Lease's shape and enums, as plain data, so that the functions validate by openapi.yaml's own rules without
parsing YAML at cold start: scheduler/inputs.py applies them. A rule holds what openapi.yaml states and nothing
else; a pattern matches the whole string (`re.fullmatch`: openapi.yaml's anchors are left out); the bounds of a
`number` are floats. tests/unit/test_wire_contract.py fails, naming the field, when this and openapi.yaml differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from typing import Literal, NotRequired, TypedDict

    class TextRule(TypedDict):
        type: Literal["string"]
        required: bool
        nullable: bool
        default: NotRequired[str]
        min_length: NotRequired[int]
        max_length: NotRequired[int]
        pattern: NotRequired[str]
        format: NotRequired[Literal["date", "date-time"]]
        excluded: NotRequired[tuple[str, ...]]

    class ChoiceRule(TypedDict):
        type: Literal["string"]
        required: bool
        nullable: bool
        enum: tuple[str, ...]
        default: NotRequired[str]

    class IntegerRule(TypedDict):
        type: Literal["integer"]
        required: bool
        nullable: bool
        default: NotRequired[int]
        minimum: NotRequired[int]
        maximum: NotRequired[int]

    class NumberRule(TypedDict):
        type: Literal["number"]
        required: bool
        nullable: bool
        default: NotRequired[float]
        minimum: NotRequired[float]
        maximum: NotRequired[float]

    class BooleanRule(TypedDict):
        type: Literal["boolean"]
        required: bool
        nullable: bool
        default: NotRequired[bool]

    class TextMapRule(TypedDict):
        type: Literal["object"]
        required: bool
        nullable: bool
        max_properties: NotRequired[int]
        key_pattern: NotRequired[str]
        value: TextRule

    class TextListRule(TypedDict):
        type: Literal["array"]
        required: bool
        nullable: bool
        unique: bool
        max_items: NotRequired[int]
        min_items: NotRequired[int]
        items: TextRule

    class LeaseRequestRules(TypedDict):
        kind: ChoiceRule
        gpu: ChoiceRule
        ttl_seconds: IntegerRule
        owner_id: TextRule
        correlation_id: TextRule
        region: TextRule
        max_cost_per_hour: NumberRule
        queue_seconds: IntegerRule
        priority: IntegerRule
        preemptible: BooleanRule
        env: TextMapRule

    class RenewRequestRules(TypedDict):
        ttl_seconds: IntegerRule

    class CallerRequestRules(TypedDict):
        name: TextRule
        owners: TextListRule
        role: ChoiceRule
        principal_arn: TextRule

    class RotateRequestRules(TypedDict):
        grace_seconds: IntegerRule

    class WebhookRequestRules(TypedDict):
        url: TextRule
        events: TextListRule
        owner_id: TextRule

    class ListLeasesQueryRules(TypedDict):
        owner_id: TextRule
        kind: ChoiceRule
        provider: TextRule
        limit: IntegerRule
        next_token: TextRule

    class ReleaseOwnerLeasesQueryRules(TypedDict):
        owner_id: TextRule
        next_token: TextRule

    class GetLeaseQueryRules(TypedDict):
        wait_ready: IntegerRule

    class GetQueueQueryRules(TypedDict):
        owner_id: TextRule
        limit: IntegerRule

    class GetUsageQueryRules(TypedDict):
        owner_id: TextRule
        since: TextRule
        until: TextRule
        group_by: ChoiceRule

    class GetLeaseLogsQueryRules(TypedDict):
        tail: IntegerRule
        since: TextRule
        timestamps: ChoiceRule

    class ListLeaseEventsQueryRules(TypedDict):
        after: IntegerRule
        limit: IntegerRule

    class ListWebhooksQueryRules(TypedDict):
        owner_id: TextRule

    HeaderRules = TypedDict("HeaderRules", {"Idempotency-Key": TextRule, "X-Lease-Owner": TextRule})


# POST /v1/lease: the JSON body, schema LeaseRequest
LEASE_REQUEST: Final[LeaseRequestRules] = {
    "kind": {
        "type": "string",
        "required": True,
        "nullable": False,
        "enum": ("renderer", "anim"),
    },
    "gpu": {
        "type": "string",
        "required": False,
        "nullable": False,
        "enum": ("none", "entry", "mid", "high"),
        "default": "none",
    },
    "ttl_seconds": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 3600,
        "minimum": 1,
        "maximum": 28800,
    },
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": True,
        "max_length": 128,
        "pattern": "([!-~]([ -~]*[!-~])?)?",
    },
    "correlation_id": {
        "type": "string",
        "required": False,
        "nullable": True,
        "max_length": 128,
    },
    "region": {
        "type": "string",
        "required": False,
        "nullable": True,
        "max_length": 128,
    },
    "max_cost_per_hour": {
        "type": "number",
        "required": False,
        "nullable": True,
        "minimum": 1e-06,
        "maximum": 10000.0,
    },
    "queue_seconds": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 0,
        "minimum": 0,
        "maximum": 86400,
    },
    "priority": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 50,
        "minimum": 0,
        "maximum": 100,
    },
    "preemptible": {
        "type": "boolean",
        "required": False,
        "nullable": False,
        "default": False,
    },
    "env": {
        "type": "object",
        "required": False,
        "nullable": False,
        "max_properties": 64,
        "key_pattern": "[A-Z_][A-Z0-9_]*",
        "value": {
            "type": "string",
            "required": False,
            "nullable": False,
            "max_length": 4096,
            "pattern": "[^\\u0000]*",
        },
    },
}

# POST /v1/lease/{lease_id}/renew: the JSON body, schema RenewRequest
RENEW_REQUEST: Final[RenewRequestRules] = {
    "ttl_seconds": {
        "type": "integer",
        "required": False,
        "nullable": True,
        "minimum": 1,
        "maximum": 28800,
    },
}

# POST /v1/callers: the JSON body, schema CallerRequest
CALLER_REQUEST: Final[CallerRequestRules] = {
    "name": {
        "type": "string",
        "required": True,
        "nullable": False,
        "excluded": ("admin", "shared-secret", "sweep", "ttl-stream", "reconciler"),
        "pattern": "[a-z0-9][a-z0-9-]{0,62}",
    },
    "owners": {
        "type": "array",
        "required": True,
        "nullable": False,
        "max_items": 32,
        "unique": True,
        "items": {
            "type": "string",
            "required": False,
            "nullable": False,
            "max_length": 128,
            "pattern": "[!-~]([ -~]*[!-~])?",
        },
    },
    "role": {
        "type": "string",
        "required": True,
        "nullable": False,
        "enum": ("service", "operator", "viewer"),
    },
    "principal_arn": {
        "type": "string",
        "required": False,
        "nullable": True,
        "max_length": 1024,
        "pattern": "arn:aws(-[a-z]+)*:iam::[0-9]{12}:(user|role)/[!-~]{1,512}",
    },
}

# POST /v1/callers/{name}/rotate: the JSON body, schema RotateRequest
ROTATE_REQUEST: Final[RotateRequestRules] = {
    "grace_seconds": {
        "type": "integer",
        "required": True,
        "nullable": False,
        "minimum": 0,
        "maximum": 604800,
    },
}

# POST /v1/webhooks: the JSON body, schema WebhookRequest
WEBHOOK_REQUEST: Final[WebhookRequestRules] = {
    "url": {
        "type": "string",
        "required": True,
        "nullable": False,
        "max_length": 2048,
        "pattern": "[hH][tT][tT][pP][sS]?://[!-~]+",
    },
    "events": {
        "type": "array",
        "required": False,
        "nullable": True,
        "max_items": 10,
        "min_items": 1,
        "unique": True,
        "items": {
            "type": "string",
            "required": False,
            "nullable": False,
            "max_length": 64,
            "pattern": "lease[.][a-z_]+",
        },
    },
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": True,
        "max_length": 128,
        "pattern": "[!-~]([ -~]*[!-~])?",
    },
}

# GET /v1/leases: the query parameters (operation listLeases); no other is taken
LIST_LEASES_QUERY: Final[ListLeasesQueryRules] = {
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 128,
        "pattern": "[!-~]([ -~]*[!-~])?",
    },
    "kind": {
        "type": "string",
        "required": False,
        "nullable": False,
        "enum": ("renderer", "anim"),
    },
    "provider": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 64,
    },
    "limit": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 100,
        "minimum": 1,
        "maximum": 1000,
    },
    "next_token": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 4096,
        "pattern": "[A-Za-z0-9_-]*",
    },
}

# DELETE /v1/leases: the query parameters (operation releaseOwnerLeases); no other is taken
RELEASE_OWNER_LEASES_QUERY: Final[ReleaseOwnerLeasesQueryRules] = {
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 128,
        "pattern": "[!-~]([ -~]*[!-~])?",
    },
    "next_token": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 4096,
    },
}

# GET /v1/lease/{lease_id}: the query parameters (operation getLease); no other is taken
GET_LEASE_QUERY: Final[GetLeaseQueryRules] = {
    "wait_ready": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 0,
        "minimum": 0,
        "maximum": 25,
    },
}

# GET /v1/queue: the query parameters (operation getQueue); no other is taken
GET_QUEUE_QUERY: Final[GetQueueQueryRules] = {
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 128,
        "pattern": "[!-~]([ -~]*[!-~])?",
    },
    "limit": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 100,
        "minimum": 1,
        "maximum": 1000,
    },
}

# GET /v1/usage: the query parameters (operation getUsage); no other is taken
GET_USAGE_QUERY: Final[GetUsageQueryRules] = {
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 128,
        "pattern": "[!-~]([ -~]*[!-~])?",
    },
    "since": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 10,
        "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "format": "date",
    },
    "until": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 10,
        "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "format": "date",
    },
    "group_by": {
        "type": "string",
        "required": False,
        "nullable": False,
        "enum": ("owner", "kind", "provider"),
        "default": "owner",
    },
}

# GET /v1/lease/{lease_id}/logs: the query parameters (operation getLeaseLogs); no other is taken
GET_LEASE_LOGS_QUERY: Final[GetLeaseLogsQueryRules] = {
    "tail": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 200,
        "minimum": 1,
        "maximum": 5000,
    },
    "since": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 64,
        "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})",  # noqa: E501
        "format": "date-time",
    },
    "timestamps": {
        "type": "string",
        "required": False,
        "nullable": False,
        "enum": ("true", "false"),
        "default": "false",
    },
}

# GET /v1/lease/{lease_id}/events: the query parameters (operation listLeaseEvents); no other is taken
LIST_LEASE_EVENTS_QUERY: Final[ListLeaseEventsQueryRules] = {
    "after": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 0,
        "minimum": 0,
        "maximum": 1000000000,
    },
    "limit": {
        "type": "integer",
        "required": False,
        "nullable": False,
        "default": 100,
        "minimum": 1,
        "maximum": 1000,
    },
}

# GET /v1/webhooks: the query parameters (operation listWebhooks); no other is taken
LIST_WEBHOOKS_QUERY: Final[ListWebhooksQueryRules] = {
    "owner_id": {
        "type": "string",
        "required": False,
        "nullable": False,
        "max_length": 128,
        "pattern": "[!-~]([ -~]*[!-~])?",
    },
}

# The request headers' values, by name
HEADERS: Final[HeaderRules] = {
    "Idempotency-Key": {
        "type": "string",
        "required": False,
        "nullable": False,
        "min_length": 1,
        "max_length": 255,
        "pattern": "[ -~]+",
    },
    "X-Lease-Owner": {
        "type": "string",
        "required": False,
        "nullable": False,
    },
}

# Lease: its properties, in order
LEASE_FIELDS: Final = (
    "lease_id",
    "provider",
    "kind",
    "gpu",
    "status",
    "endpoint",
    "created_at",
    "expires_at",
    "released_at",
    "provider_token",
    "owner_id",
    "correlation_id",
    "region",
    "ttl_seconds",
    "cost_per_hour",
    "failure_reason",
    "worker_state",
    "ready_at",
    "max_cost_per_hour",
    "cost_usd",
    "created_by",
    "ended_by",
    "priority",
    "preemptible",
    "queued_at",
    "queued_until",
    "queue_position",
    "queue_reason",
    "admitted_at",
    "preempt_at",
    "preempt_priority",
)

# Lease: the properties always sent
LEASE_REQUIRED: Final = (
    "lease_id",
    "provider",
    "kind",
    "gpu",
    "status",
    "endpoint",
    "created_at",
    "expires_at",
    "released_at",
    "provider_token",
    "owner_id",
    "correlation_id",
    "region",
    "ttl_seconds",
    "cost_per_hour",
    "failure_reason",
    "worker_state",
    "ready_at",
    "max_cost_per_hour",
    "cost_usd",
    "created_by",
    "ended_by",
    "priority",
    "preemptible",
    "queued_at",
    "queued_until",
    "queue_position",
    "queue_reason",
    "admitted_at",
    "preempt_at",
    "preempt_priority",
)

# Lease: the properties that may be null
LEASE_NULLABLE: Final = (
    "endpoint",
    "released_at",
    "provider_token",
    "owner_id",
    "correlation_id",
    "region",
    "cost_per_hour",
    "failure_reason",
    "ready_at",
    "max_cost_per_hour",
    "cost_usd",
    "created_by",
    "ended_by",
    "queued_at",
    "queued_until",
    "queue_position",
    "queue_reason",
    "admitted_at",
    "preempt_at",
    "preempt_priority",
)

# LeaseStatus
LEASE_STATUSES: Final = ("pending", "active", "releasing", "released", "expired", "failed", "queued", "preempted")

# LiveLease: the statuses listed
LIVE_LEASE_STATUSES: Final = ("pending", "active", "releasing", "queued")

# Lease.worker_state
WORKER_STATES: Final = ("starting", "ready")

# WorkerKind
WORKER_KINDS: Final = ("renderer", "anim")

# GpuClass
GPU_CLASSES: Final = ("none", "entry", "mid", "high")
