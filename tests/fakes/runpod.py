"""A local fake of RunPod's REST API v2 for pods, following RunPod's OpenAPI description.

Tests only: nothing under `layers/` or `functions/` may import this module. Stdlib only. The catalog and
placement (`runpod_catalog`), the request quota (`runpod_quota`) and pod logs (`runpod_logs`) live beside it.

Speaks, on loopback only:

- `POST /v2/pods` (createPod) → 201 Pod; `GET /v2/pods` (listPods) → 200 `{"pods": [...]}`;
  `GET /v2/pods/{id}` (getPod) → 200 Pod or 404; `DELETE /v2/pods/{id}` (deletePod) → 204 or 404.
- `GET /v2/pods/{id}/logs` (getPodLogs) → 200 `text/event-stream`: `id: <ts>/<seq>` + `data: {"ts", "source",
  "line"}` per line; `source` (container|system), `tail` (default 100, 0–5000), `since` (RFC 3339, inclusive)
  and the `Last-Event-ID` header (an event id: strictly after it; a bare RFC 3339 time: like `since`) choose
  the backfill; the stream then stays open with new lines until the client leaves, the pod is deleted or
  `logs_stream_seconds` pass. 404 for an unknown or deleted pod; a bad parameter → 422.
- `GET /v2/catalog/gpus[/{id}]` (listGpuTypes, getGpuType) → GpuType objects: prices from `gpu_prices`
  (`price.secure`) and `community_gpu_prices` (`price.community`, default the secure one); with
  `include=AVAILABILITY&product=POD` also `availability`, `dataCenters` and `cudaVersions` from
  `data_centers`. `GET /v2/catalog/datacenters[/{id}]` (listDataCenters, getDataCenter) → DataCenter
  objects with the `regions`/`networkVolumeTypes`/`compliance`/`globalNetwork` filters and
  `include=GPU_AVAILABILITY,CPU_AVAILABILITY`. Parameters as the description defines them: a malformed
  value → 422, a rule (`product` without `include=AVAILABILITY`, ...) → 400; unknown id → 404.
- Every error is `application/problem+json` `{title, status, detail[, errors]}`; unknown paths → 404,
  a method the path does not have → 405 with `Allow`; paths and methods RunPod has but this fake does
  not implement (PATCH a pod, templates, CPU catalog, …) → 501.
- Cloudflare in front: no `User-Agent` → 403 `text/plain` `error code: 1010`, before anything else.
- Bearer auth: `Authorization: Bearer <api_key>` or 401 (`missing bearer token` / `invalid bearer
  token`). Authenticated answers carry `RateLimit-Policy` (the `rate_limit_policy` switch, default RunPod's
  60/min, 3,000/h, 50,000/day) and `RateLimit` (remaining `r`, seconds to reset `t`, per window) counted
  per API key over every authenticated request. With `enforce_quota`, a request over any window's quota is
  not served: 429 `rate limit exceeded for the <window> window` with `Retry-After` (the longest reset of the
  windows used up); refused requests do not use quota. Windows are fixed and start again on a reset and
  whenever the quota switches change.
- Validation as RunPod does it: 422 `Request validation failed.` with `errors` naming each violation of
  the CreatePodRequest schema (`$: additional properties 'bogus' not allowed`, `$.gpu.count: minimum:
  got 0, want 1`, …); cross-field rules (exactly one of gpu/cpu, …) → 400; unknown templateId → 404.

Pods. A pod is created PROVISIONING and moves to STARTING, then RUNNING (`runtime` null until then, then
`runtime.ports` maps each port, `startedAt` set). By default reads move it (`running_after_gets`); with
`provisioning_seconds`/`starting_seconds` time does, whoever looks. Some pods never run: `fail_boot_*`
pods end in ERROR (when they would have run, or `fail_boot_after_seconds` after create), `stuck_starting_*`
pods stay STARTING. A pod bills (`cost`: catalog price × GPU count × `cost_markup`) in every status but
EXITED and TERMINATED. `dataCenterIds` restricts placement to the requested data centers that stock the GPU
type (`data_centers`), else 400 with RunPod's capacity detail. Each transition writes `system` log lines;
tests add `container` lines.

Failure switches live in `FakeConfig` (see its fields). Set them from Python (`fake.configure(...)`,
or `fake.config.<field> = ...`) or over HTTP, so a separately running fake can be driven too:

- `POST /_fake/config` with a JSON object of `FakeConfig` fields → 200 `{"config": {...}}` (400 on
  an unknown field or a bad value); `POST /_fake/reset` → 204 (pods, request log, quota counts and config
  back to defaults; api key and templates stay); `GET /_fake/state` → 200 `{"pods", "deletedPodIds",
  "requests", "config", "rateLimited": {"quota", "forced"}, "quota": {"policy", "enforced", "windows"}}`;
  `POST /_fake/pods/{id}/status` `{"status": "EXITED"}` → 200 Pod;
  `POST /_fake/pods/{id}/logs` `{"lines": [...], "source": "container"}` → 200 `{"events": [...]}` (what a
  pod printed); `GET /_fake/pods/{id}/logs` → 200 `{"events": [...]}` (also a deleted pod's).

The control paths need no auth or User-Agent, are never logged, never counted against the quota and are
never affected by switches.

CLI: `python -m tests.fakes.runpod --port 8089 --api-key dev-key --template tpl-renderer` prints the
base URL and serves until SIGTERM or Ctrl-C (`--help` for the lifecycle and quota options).
"""

from __future__ import annotations

import argparse
import copy
import ipaddress
import json
import re
import secrets
import select
import signal
import socket
import string
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Final, Protocol, TypedDict
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.runpod_catalog import (
    AVAILABILITY_LEVELS,
    DEFAULT_DATA_CENTERS,
    Catalog,
    QueryProblem,
    parse_data_center_query,
    parse_gpu_query,
)
from tests.fakes.runpod_catalog import (  # re-exported: this module has always named it
    DEFAULT_DATA_CENTER as DEFAULT_DATA_CENTER,
)
from tests.fakes.runpod_logs import LOG_SOURCES, SSE_HEADERS, LogEvent, PodLog, parse_log_query
from tests.fakes.runpod_quota import RATE_LIMIT_POLICY, QuotaMeter, parse_policy, render_policy

# --- constants taken from RunPod's OpenAPI description and PLATFORM-NOTES ------------------------

CAPACITY_DETAIL: Final = (
    "There are no longer any instances available with the requested specifications. Please refresh and try again."
)
INSUFFICIENT_BALANCE_DETAIL: Final = "insufficient balance: add funds to continue"
VALIDATION_DETAIL: Final = "Request validation failed."
CLOUDFLARE_1010_BODY: Final = "error code: 1010"
PROBLEM_JSON: Final = "application/problem+json"

DEFAULT_GPU_PRICES: Final[Mapping[str, float]] = {
    "NVIDIA GeForce RTX 4090": 0.69,
    "NVIDIA A100 80GB PCIe": 1.64,
    "NVIDIA H100 80GB HBM3": 2.99,
}
DEFAULT_IMAGE: Final = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"
DEFAULT_CUDA_VERSION: Final = "12.8"
POD_STATUSES: Final = ("PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED")
# Valid actions per status, as podAction describes them.
_ACTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "PROVISIONING": ("stop", "terminate"),
    "STARTING": ("stop", "terminate"),
    "RUNNING": ("stop", "restart", "terminate"),
    "EXITED": ("start", "terminate"),
    "ERROR": ("start", "terminate"),
    "TERMINATED": (),
}
_TITLES: Final[Mapping[int, str]] = {
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_FAIL_DETAILS: Final[Mapping[int, str]] = {
    500: "internal server error",
    502: "upstream returned an invalid response",
    503: "service temporarily unavailable",
    504: "upstream timed out",
}
_ID_ALPHABET: Final = string.ascii_lowercase + string.digits
_CUDA_PATTERN: Final = re.compile(r"\d+\.\d+", re.ASCII)
_PORT_PATTERN: Final = re.compile(r"(\d{1,5})/(http|tcp)", re.ASCII)

# Paths of RunPod's v2 API (OpenAPI `paths`) with their methods: those this fake does not serve
# answer 501 rather than 404, and a method the real path lacks answers 405 with the real `Allow`.
_SEGMENT = r"[^/]+"
_SPEC_ROUTES: Final[tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]] = tuple(
    (re.compile("^" + path.replace("{}", _SEGMENT) + "$"), methods)
    for path, methods in (
        ("/v2/pods", ("GET", "POST")),
        ("/v2/pods/{}", ("GET", "PATCH", "DELETE")),
        ("/v2/pods/{}/logs", ("GET",)),
        ("/v2/pods/{}/action", ("POST",)),
        ("/v2/account/ssh-keys", ("GET", "PUT")),
        ("/v2/clusters", ("GET", "POST")),
        ("/v2/clusters/{}", ("GET", "PATCH", "DELETE")),
        ("/v2/clusters/{}/pods", ("GET",)),
        ("/v2/serverless", ("GET", "POST")),
        ("/v2/serverless/{}", ("GET", "PATCH", "DELETE")),
        ("/v2/serverless/{}/workers", ("GET",)),
        ("/v2/serverless/{}/releases", ("GET",)),
        ("/v2/serverless/{}/workers/{}/logs", ("GET",)),
        ("/v2/templates", ("GET", "POST")),
        ("/v2/templates/{}", ("GET", "PATCH", "DELETE")),
        ("/v2/network-volumes", ("GET", "POST")),
        ("/v2/network-volumes/{}", ("GET", "PATCH", "DELETE")),
        ("/v2/registries/delegations", ("GET", "POST")),
        ("/v2/registries/delegations/{}", ("DELETE",)),
        ("/v2/registries", ("GET", "POST")),
        ("/v2/registries/{}", ("GET", "DELETE")),
        ("/v2/catalog/gpus", ("GET",)),
        ("/v2/catalog/gpus/{}", ("GET",)),
        ("/v2/catalog/cpus", ("GET",)),
        ("/v2/catalog/cpus/{}", ("GET",)),
        ("/v2/catalog/datacenters", ("GET",)),
        ("/v2/catalog/datacenters/{}", ("GET",)),
        ("/v2/catalog/templates", ("GET",)),
        ("/v2/billing", ("GET",)),
        ("/v2/billing/pods", ("GET",)),
        ("/v2/billing/serverless", ("GET",)),
        ("/v2/billing/endpoints", ("GET",)),
        ("/v2/billing/network-volumes", ("GET",)),
        ("/v2/billing/clusters", ("GET",)),
    )
)
_POD_PATH: Final = re.compile(r"^/v2/pods/([^/]+)$")
_POD_LOGS_PATH: Final = re.compile(r"^/v2/pods/([^/]+)/logs$")
_GPU_PATH: Final = re.compile(r"^/v2/catalog/gpus/([^/]+)$")
_DATA_CENTER_PATH: Final = re.compile(r"^/v2/catalog/datacenters/([^/]+)$")
_BOOT_OUTCOMES: Final = ("run", "error", "stuck")

# CreatePodRequest: ContainerConfig (BaseContainerConfig + registry) plus the request's own fields.
_CREATE_FIELDS: Final = frozenset(
    {"args", "disk", "env", "image", "ports", "registry"}
    | {"name", "cloud", "cpu", "dataCenterIds", "globalNetworking", "gpu", "mounts", "startJupyter", "startSsh"}
    | {"templateId"}
)
_TEMPLATE_FIELDS: Final = frozenset(
    {"name", "image", "args", "disk", "mounts", "ports", "env", "registry", "serverless", "public", "category"}
    | {"startSsh", "startJupyter", "allowedCudaVersions"}
)


class Headers(Protocol):
    """Request headers: `http.client.HTTPMessage` (case-insensitive) or a plain dict."""

    def get(self, name: str, /) -> str | None: ...


class RequestRecord(TypedDict):
    """One API request as the fake saw it (control paths are not recorded)."""

    method: str
    path: str
    query: str
    user_agent: str | None
    has_authorization: bool
    authorized: bool
    content_type: str | None
    body: Any  # parsed JSON, else the raw text, else None when empty
    status: int


class FakeConfigError(ValueError):
    """A `configure` call named an unknown switch or gave a bad value."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass
class FakeConfig:
    """The fake's behaviour switches. Counters (`*_next*`, `create_500_but_running`, `delete_answers_404`)
    count down as requests consume them."""

    # A pod reads PROVISIONING, then STARTING, then RUNNING: it is RUNNING from read N+1 on (reads are
    # getPod and listPods answers that include it). 0: RUNNING on the first read.
    running_after_gets: int = 0
    no_capacity_gpu_ids: set[str] = field(default_factory=set)  # create on one (GPU or CPU id) → 400 CAPACITY_DETAIL
    forbidden_gpu_ids: set[str] = field(default_factory=set)  # create → 403 "access denied"
    insufficient_balance: bool = False  # create → 402
    rate_limit_next: int = 0  # next N authenticated API requests → 429
    rate_limit_next_creates: int = 0  # next N creates → 429
    rate_limit_retry_after: int = 1  # Retry-After seconds on those 429s
    fail_next_creates: int = 0  # next N (valid) creates → fail_status, nothing created
    fail_next_lists: int = 0  # next N lists → fail_status
    fail_next_gets: int = 0  # next N getPod → fail_status
    fail_next_deletes: int = 0  # next N deletes → fail_status, nothing deleted
    fail_status: int = 503  # 500, 502, 503 or 504
    create_500_but_running: int = 0  # next N creates make the pod (RUNNING, listed) but answer 500
    delete_answers_404: int = 0  # next N deletes remove the pod but answer 404
    # After a delete, getPod still shows the pod RUNNING for N reads, then TERMINATED once, then 404.
    # 0: 404 straight away. listPods never shows a deleted pod.
    delete_lag_reads: int = 0
    slow_seconds: float = 0.0  # every API answer waits this long (after the work is done)
    slow_creates_seconds: float = 0.0  # added for creates (the pod is still made: a timed-out success)
    slow_lists_seconds: float = 0.0
    slow_gets_seconds: float = 0.0
    slow_deletes_seconds: float = 0.0  # added for deletes (the pod is still deleted)
    gpu_prices: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_GPU_PRICES))  # USD/h per GPU
    default_gpu_price: float = 0.5  # USD/h per GPU of a type missing from gpu_prices
    cpu_price_per_vcpu: float = 0.03  # USD/h per vCPU of a CPU pod

    # Lifecycle by time. Either above 0: a pod is PROVISIONING for provisioning_seconds after create, then
    # STARTING for starting_seconds, then RUNNING, however often it is read (running_after_gets is ignored).
    provisioning_seconds: float = 0.0
    starting_seconds: float = 0.0
    # Pods that end in ERROR instead of RUNNING: the next N creates, or pods of these GPU types / templates.
    fail_boot_next: int = 0
    fail_boot_gpu_ids: set[str] = field(default_factory=set)
    fail_boot_template_ids: set[str] = field(default_factory=set)
    # > 0: such a pod turns ERROR this many seconds after create (from PROVISIONING or STARTING) and never
    # runs; 0: it turns ERROR at the moment it would have run.
    fail_boot_after_seconds: float = 0.0
    # Pods that reach STARTING and stay there: the next N creates, or pods of these GPU types / templates.
    stuck_starting_next: int = 0
    stuck_starting_gpu_ids: set[str] = field(default_factory=set)
    stuck_starting_template_ids: set[str] = field(default_factory=set)

    # Catalog and placement. price.community per GPU type (default: its gpu_prices price, which COMMUNITY
    # pods then bill); a pod's cost is price × GPU count × cost_markup (≠ 1: it bills other than the
    # catalog says). data_centers: id → {GPU type id → NONE|LOW|MEDIUM|HIGH} in placement order;
    # dataCenterIds restricts a create to the requested ones that stock the type (not NONE).
    community_gpu_prices: dict[str, float] = field(default_factory=dict)
    cost_markup: float = 1.0
    data_centers: dict[str, dict[str, str]] = field(
        default_factory=lambda: {dc: dict(stock) for dc, stock in DEFAULT_DATA_CENTERS.items()}
    )

    # Quota: the windows as RunPod advertises them in RateLimit-Policy; enforce_quota answers 429 past them.
    enforce_quota: bool = False
    rate_limit_policy: str = RATE_LIMIT_POLICY

    # getPodLogs: None keeps the stream open until the client leaves, the pod goes or the fake stops (as
    # RunPod's SSE stream); N ends it N seconds after the backfill (0: the backfill only).
    logs_stream_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The switches as JSON (sets as sorted lists)."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            out[item.name] = sorted(value) if isinstance(value, set) else copy.deepcopy(value)
        return out


_COUNTERS: Final = frozenset(
    {"running_after_gets", "rate_limit_next", "rate_limit_next_creates", "rate_limit_retry_after"}
    | {"fail_next_creates", "fail_next_lists", "fail_next_gets", "fail_next_deletes"}
    | {"create_500_but_running", "delete_answers_404", "delete_lag_reads"}
    | {"fail_boot_next", "stuck_starting_next"}
)
_NON_NEGATIVE_NUMBERS: Final = frozenset(
    {"slow_seconds", "slow_creates_seconds", "slow_lists_seconds", "slow_gets_seconds", "slow_deletes_seconds"}
    | {"default_gpu_price", "cpu_price_per_vcpu"}
    | {"provisioning_seconds", "starting_seconds", "fail_boot_after_seconds", "cost_markup"}
)
_ID_SETS: Final = frozenset({"no_capacity_gpu_ids", "forbidden_gpu_ids", "fail_boot_gpu_ids", "stuck_starting_gpu_ids"})
_TEMPLATE_ID_SETS: Final = frozenset({"fail_boot_template_ids", "stuck_starting_template_ids"})
_QUOTA_FIELDS: Final = frozenset({"enforce_quota", "rate_limit_policy"})
_CONFIG_FIELDS: Final = frozenset(item.name for item in fields(FakeConfig))


def _coerce_config(changes: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Checked values for `FakeConfig` fields, and what was wrong."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, value in changes.items():
        if name not in _CONFIG_FIELDS:
            errors.append(f"unknown setting {name!r}")
        elif name in _COUNTERS:
            if _is_int(value) and value >= 0:
                values[name] = int(value)
            else:
                errors.append(f"{name}: want an integer >= 0")
        elif name in _NON_NEGATIVE_NUMBERS:
            if _is_number(value) and value >= 0:
                values[name] = float(value)
            else:
                errors.append(f"{name}: want a number >= 0")
        elif name in _ID_SETS:
            if isinstance(value, list | tuple | set | frozenset) and all(isinstance(v, str) for v in value):
                values[name] = set(value)
            else:
                errors.append(f"{name}: want a list of GPU type ids")
        elif name in _TEMPLATE_ID_SETS:
            if isinstance(value, list | tuple | set | frozenset) and all(isinstance(v, str) for v in value):
                values[name] = set(value)
            else:
                errors.append(f"{name}: want a list of template ids")
        elif name in ("insufficient_balance", "enforce_quota"):
            if isinstance(value, bool):
                values[name] = value
            else:
                errors.append(f"{name}: want a boolean")
        elif name == "fail_status":
            if _is_int(value) and int(value) in _FAIL_DETAILS:
                values[name] = int(value)
            else:
                errors.append(f"{name}: want one of {sorted(_FAIL_DETAILS)}")
        elif name in ("gpu_prices", "community_gpu_prices"):
            if isinstance(value, Mapping) and all(
                isinstance(k, str) and _is_number(v) and v >= 0 for k, v in value.items()
            ):
                values[name] = {k: float(v) for k, v in value.items()}
            else:
                errors.append(f"{name}: want an object of GPU type id → price per hour")
        elif name == "data_centers":
            stock = _coerce_data_centers(value)
            if stock is None:
                errors.append(
                    f"{name}: want an object of data center id → {{GPU type id → one of {list(AVAILABILITY_LEVELS)}}}"
                    " (or a list of GPU type ids, each HIGH)"
                )
            else:
                values[name] = stock
        elif name == "rate_limit_policy":
            try:
                if not isinstance(value, str):
                    raise ValueError("want a string")
                values[name] = render_policy(parse_policy(value))
            except ValueError as error:
                errors.append(f"{name}: {error}")
        elif name == "logs_stream_seconds":
            if value is None or (_is_number(value) and value >= 0):
                values[name] = None if value is None else float(value)
            else:
                errors.append(f"{name}: want a number >= 0 or null")
    return values, errors


def _coerce_data_centers(value: object) -> dict[str, dict[str, str]] | None:
    """`data_centers` as data center id → {GPU type id → availability level}; None when malformed."""
    if not isinstance(value, Mapping) or not all(isinstance(dc, str) and dc for dc in value):
        return None
    stock: dict[str, dict[str, str]] = {}
    for dc, gpus in value.items():
        if isinstance(gpus, list | tuple) and all(isinstance(gpu, str) for gpu in gpus):
            stock[dc] = dict.fromkeys(gpus, "HIGH")
        elif isinstance(gpus, Mapping) and all(
            isinstance(gpu, str) and level in AVAILABILITY_LEVELS for gpu, level in gpus.items()
        ):
            stock[dc] = dict(gpus)
        else:
            return None
    return stock


# --- JSON helpers --------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    """An integer as JSON Schema sees it (1.0 counts, booleans do not)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_int(value):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _quoted(names: list[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- CreatePodRequest validation -----------------------------------------------------------------


class _Validator:
    """Collects schema violations in RunPod's style: `<JSON path>: <what is wrong>`."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}")

    def typed(self, path: str, value: object, *want: str) -> bool:
        actual = _json_type(value)
        if actual in want or (actual == "integer" and "number" in want):
            return True
        self.fail(path, f"got {actual}, want {' or '.join(want)}")
        return False

    def string(self, path: str, value: object, min_length: int = 0, pattern: re.Pattern[str] | None = None) -> None:
        if not self.typed(path, value, "string"):
            return
        assert isinstance(value, str)
        if len(value) < min_length:
            self.fail(path, f"minLength: got {len(value)}, want {min_length}")
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(path, f"'{value}' does not match pattern '^{pattern.pattern}$'")

    def integer(self, path: str, value: object, minimum: int | None = None) -> None:
        if not self.typed(path, value, "integer"):
            return
        assert isinstance(value, int | float)
        if minimum is not None and value < minimum:
            self.fail(path, f"minimum: got {value:g}, want {minimum}")

    def strings(self, path: str, value: object, pattern: re.Pattern[str] | None = None) -> None:
        if self.typed(path, value, "array"):
            assert isinstance(value, list)
            for index, item in enumerate(value):
                self.string(_child(path, index), item, pattern=pattern)

    def obj(
        self, path: str, value: object, allowed: frozenset[str] | None, required: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        if not self.typed(path, value, "object"):
            return None
        assert isinstance(value, dict)
        missing = [name for name in required if name not in value]
        if missing:
            noun = "property" if len(missing) == 1 else "properties"
            self.fail(path, f"missing {noun} {_quoted(missing)}")
        if allowed is not None:
            extra = [name for name in value if name not in allowed]
            if extra:
                self.fail(path, f"additional properties {_quoted(extra)} not allowed")
        return value


def validate_create_pod_request(body: object) -> list[str]:
    """Violations of the CreatePodRequest schema (what RunPod answers with 422), in RunPod's style."""
    check = _Validator()
    required = ("name",) if isinstance(body, dict) and "templateId" in body else ("name", "image")
    top = check.obj("$", body, _CREATE_FIELDS, required)
    if top is None:
        return check.errors
    for key, value in top.items():
        path = _child("$", key)
        if key in ("args", "image"):
            check.string(path, value)
        elif key in ("name", "templateId"):
            check.string(path, value, min_length=1)
        elif key == "disk":
            check.integer(path, value, minimum=1)
        elif key == "env":
            env = check.obj(path, value, None)
            for name, item in (env or {}).items():
                check.typed(_child(path, name), item, "string")
        elif key in ("ports", "dataCenterIds"):
            check.strings(path, value)
        elif key == "registry":
            check.typed(path, value, "string", "null")
        elif key == "cloud":
            if value not in ("SECURE", "COMMUNITY"):
                check.fail(path, "value must be one of 'SECURE', 'COMMUNITY'")
        elif key in ("globalNetworking", "startJupyter", "startSsh"):
            check.typed(path, value, "boolean")
        elif key == "gpu":
            gpu = check.obj(path, value, frozenset({"id", "count", "allowedCudaVersions", "minCudaVersion"}), ("id",))
            for name, item in (gpu or {}).items():
                if name == "id":
                    check.string(_child(path, name), item)
                elif name == "count":
                    check.integer(_child(path, name), item, minimum=1)
                elif name == "allowedCudaVersions":
                    check.strings(_child(path, name), item, pattern=_CUDA_PATTERN)
                elif name == "minCudaVersion":
                    check.string(_child(path, name), item, pattern=_CUDA_PATTERN)
        elif key == "cpu":
            cpu = check.obj(path, value, frozenset({"id", "vcpuCount"}), ("id", "vcpuCount"))
            for name, item in (cpu or {}).items():
                if name == "id":
                    check.string(_child(path, name), item, min_length=1)
                elif name == "vcpuCount":
                    check.integer(_child(path, name), item, minimum=2)
        elif key == "mounts":
            _validate_mounts(check, path, value)
    return check.errors


def _validate_mounts(check: _Validator, path: str, value: object) -> None:
    mounts = check.obj(path, value, frozenset({"persistent", "network"}))
    for name, item in (mounts or {}).items():
        where = _child(path, name)
        if name == "persistent":
            persistent = check.obj(where, item, frozenset({"size", "path"}), ("size", "path"))
            if persistent is not None:
                if "size" in persistent:
                    check.integer(_child(where, "size"), persistent["size"], minimum=10)
                if "path" in persistent:
                    check.string(_child(where, "path"), persistent["path"])
        elif name == "network" and check.typed(where, item, "array"):
            assert isinstance(item, list)
            if len(item) > 1:
                check.fail(where, f"maxItems: got {len(item)}, want 1")
            for index, entry in enumerate(item):
                at = _child(where, index)
                network = check.obj(at, entry, frozenset({"volumeId", "path"}), ("volumeId", "path"))
                for key in ("volumeId", "path"):
                    if network is not None and key in network:
                        check.string(_child(at, key), network[key])


def _rule_violation(body: dict[str, Any]) -> str | None:
    """The first cross-field rule the (schema-valid) body breaks: RunPod answers those with 400."""
    if ("gpu" in body) == ("cpu" in body):
        return "exactly one of gpu or cpu must be set"
    mounts = body.get("mounts") or {}
    if "persistent" in mounts and "network" in mounts:
        return "mounts.persistent and mounts.network are mutually exclusive"
    if "cpu" in body:
        if "persistent" in mounts:
            return "mounts.persistent is not supported on CPU pods"
        vcpus = int(body["cpu"]["vcpuCount"])
        if vcpus & (vcpus - 1):
            return f"cpu.vcpuCount must be a power of two, got {vcpus}"
    gpu = body.get("gpu") or {}
    if gpu.get("allowedCudaVersions") and "minCudaVersion" in gpu:
        return "gpu.allowedCudaVersions and gpu.minCudaVersion are mutually exclusive"
    for port in body.get("ports") or []:
        match = _PORT_PATTERN.fullmatch(port)
        if match is None or not 0 < int(match.group(1)) < 65536:
            return f"invalid port {port!r}: want <port>/http or <port>/tcp"
    return None


def _template_with_defaults(template_id: str, given: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - _TEMPLATE_FIELDS)
    if unknown:
        raise ValueError(f"template {template_id!r}: unknown fields {unknown} (known: {sorted(_TEMPLATE_FIELDS)})")
    template: dict[str, Any] = {
        "name": template_id,
        "image": DEFAULT_IMAGE,
        "args": "",
        "disk": 50,
        "mounts": {},
        "ports": ["8080/http"],
        "env": {},
        "registry": None,
        "serverless": False,
        "public": False,
        "category": "NVIDIA",
        "startSsh": False,
        "startJupyter": False,
        "allowedCudaVersions": [],
    }
    template.update(copy.deepcopy(dict(given)))
    return template


# --- pods ----------------------------------------------------------------------------------------


def _new_pod_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(10))


def _cuda_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


@dataclass
class _Pod:
    id: str
    name: str
    image: str
    args: str
    disk: int
    ports: list[str]
    env: dict[str, str]
    registry: str | None
    mounts: dict[str, Any]
    gpu: dict[str, Any] | None
    cpu: dict[str, Any] | None
    cloud: str
    data_center_id: str
    cuda_version: str | None
    cost: float
    global_networking: bool
    created_at: datetime
    running_after_gets: int
    ssh_user: str
    public_ip: str
    public_ports: dict[int, int]
    status: str = "PROVISIONING"
    status_pinned: bool = False  # set by set_pod_status: neither reads nor time move it any more
    started_at: datetime | None = None
    reads: int = 0
    deleted: bool = False
    lag_reads_left: int = 0
    terminated_shown: bool = False
    # The lifecycle switches as they were when the pod was created.
    provisioning_seconds: float = 0.0
    starting_seconds: float = 0.0
    outcome: str = "run"  # one of _BOOT_OUTCOMES: it runs, ends in ERROR, or stays STARTING
    fail_after_seconds: float = 0.0
    created_mono: float = field(default_factory=time.monotonic)
    log: PodLog = field(default_factory=PodLog)

    @property
    def timed(self) -> bool:
        """Time, not reads, moves this pod through its boot."""
        return self.provisioning_seconds + self.starting_seconds > 0

    def _booting(self) -> bool:
        return not self.status_pinned and not self.deleted and self.status in ("PROVISIONING", "STARTING")

    def settle(self) -> None:
        """Take the steps time has brought: a timed boot's, and a boot that fails after a delay."""
        if not self._booting():
            return
        elapsed = time.monotonic() - self.created_mono
        fail_at = self.fail_after_seconds if self.outcome == "error" and self.fail_after_seconds > 0 else None
        steps: list[tuple[float, str]] = []
        if self.timed:
            steps.append((self.provisioning_seconds, "STARTING"))
            boot_ends = self.provisioning_seconds + self.starting_seconds
            if self.outcome == "run":
                steps.append((boot_ends, "RUNNING"))
            elif self.outcome == "error" and fail_at is None:
                steps.append((boot_ends, "ERROR"))
        if fail_at is not None:
            steps.append((fail_at, "ERROR"))
        for offset, status in sorted(steps, key=lambda step: step[0]):
            if offset > elapsed or not self._booting():
                break
            self.enter(status, self.created_at + timedelta(seconds=offset))

    def advance(self) -> None:
        """One read (getPod, or a listPods answer that includes it): time's steps, then, for a pod moved by
        reads, PROVISIONING → STARTING → RUNNING as `running_after_gets` says."""
        self.reads += 1
        self.settle()
        if self.timed or not self._booting():
            return
        if self.reads > self.running_after_gets:
            if self.outcome == "run":
                self.enter("RUNNING")
            elif self.outcome == "error" and self.fail_after_seconds == 0:
                self.enter("STARTING")  # the container starts, then crashes
                self.enter("ERROR")
            else:  # stuck, or failing later: it has started starting
                self.enter("STARTING")
        elif self.reads == self.running_after_gets:
            self.enter("STARTING")

    def run(self) -> None:
        self.enter("RUNNING")

    def age(self, seconds: float) -> None:
        """As if everything about the pod so far had happened `seconds` earlier."""
        delta = timedelta(seconds=seconds)
        self.created_mono -= seconds
        self.created_at -= delta
        if self.started_at is not None:
            self.started_at -= delta
        self.log.shift(delta)

    def enter(self, status: str, at: datetime | None = None) -> None:
        """Move to `status` (at `at`, default now), writing the system log lines its host would."""
        if status == self.status:
            return
        moment = at or datetime.now(UTC)
        lines: list[str] = []
        if status in ("STARTING", "RUNNING") and self.status == "PROVISIONING":
            lines += [f"Pulling image {self.image}", "Starting container"]
        if status == "RUNNING":
            lines.append("Container started")
            if self.started_at is None:
                self.started_at = moment
        elif status == "ERROR":
            if self.status == "PROVISIONING":
                lines.append("Provisioning failed; pod status ERROR")
            else:
                lines.append("Container exited with code 1; pod status ERROR")
        elif status == "EXITED":
            lines.append("Container exited; pod status EXITED")
        elif status == "PROVISIONING":
            lines.append("Pod status PROVISIONING")
        self.status = status
        for line in lines:
            self.log.append("system", line, moment)

    def render(self, status: str | None = None) -> dict[str, Any]:
        """The Pod schema object for this pod, shown in `status` (default: its own)."""
        shown = status or self.status
        running = shown == "RUNNING"
        direct = None
        if running and "22/tcp" in self.ports:
            port = self.public_ports[22]
            direct = {
                "host": self.public_ip,
                "port": port,
                "username": "root",
                "command": f"ssh root@{self.public_ip} -p {port}",
            }
        networking: dict[str, Any] = {"enabled": self.global_networking}
        if self.global_networking:
            networking |= {"ip": f"10.65.{int(self.id[:4], 36) % 250}.{int(self.id[4:8], 36) % 250 + 2}"}
            networking |= {"internalDns": f"{self.id}.runpod.internal"}
        pod: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "status": shown,
            "actions": list(_ACTIONS[shown]),
            "image": self.image,
            "args": self.args,
            "disk": self.disk,
            "mounts": copy.deepcopy(self.mounts),
            "ports": list(self.ports),
            "env": dict(self.env),
            "registry": self.registry,
            "cloud": self.cloud,
            "dataCenterId": self.data_center_id,
            "cudaVersion": self.cuda_version,
            "ssh": {
                "proxy": {
                    "host": "ssh.runpod.io",
                    "port": 22,
                    "username": self.ssh_user,
                    "command": f"ssh {self.ssh_user}@ssh.runpod.io",
                },
                "direct": direct,
            },
            "template": None,  # createPod: "the created pod does not retain a link to the template"
            "cost": 0.0 if shown in ("EXITED", "TERMINATED") else self.cost,
            "locked": False,
            "globalNetworking": networking,
            "runtime": self._runtime() if running else None,
            "createdAt": _rfc3339(self.created_at),
            "startedAt": _rfc3339(self.started_at) if self.started_at and shown != "PROVISIONING" else None,
        }
        if self.gpu is not None:
            pod["gpu"] = dict(self.gpu)
        if self.cpu is not None:
            pod["cpu"] = dict(self.cpu)
        return pod

    def _runtime(self) -> dict[str, Any]:
        started = self.started_at or self.created_at
        ports = []
        for spec in self.ports:
            number, kind = spec.split("/")
            private = int(number)
            tcp = kind == "tcp"
            ports.append(
                {
                    "private": private,
                    "public": self.public_ports.get(private) if tcp else None,
                    "type": kind,
                    "ip": self.public_ip if tcp else None,
                }
            )
        runtime: dict[str, Any] = {
            "uptime": max(0, int((datetime.now(UTC) - started).total_seconds())),
            "cpu": {"util": 2},
            "memory": {"util": 5},
            "ports": ports,
        }
        if self.gpu is not None:
            runtime["gpus"] = [{"util": 0, "memoryUtil": 0} for _ in range(int(self.gpu["count"]))]
        return runtime


# --- the server ----------------------------------------------------------------------------------


@dataclass
class _Reply:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # More body after `body`, sent chunked as it comes; an empty piece is an idle tick (the handler then
    # checks whether the client is still there).
    stream: Iterator[bytes] | None = None


def _json_reply(status: int, payload: object) -> _Reply:
    return _Reply(status, json.dumps(payload).encode(), "application/json")


def _problem(status: int, detail: str, errors: list[str] | None = None, **headers: str) -> _Reply:
    payload: dict[str, Any] = {"title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    if errors is not None:
        payload["errors"] = errors
    reply = _Reply(status, json.dumps(payload).encode(), PROBLEM_JSON)
    reply.headers.update({name.replace("_", "-"): value for name, value in headers.items()})
    return reply


class FakeRunPod:
    """A RunPod REST API v2 (pods) fake on a loopback port. Use as a context manager or `start`/`stop`."""

    def __init__(
        self,
        api_key: str = "test-key",
        known_templates: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
    ) -> None:
        self.api_key = api_key
        self.verbose = verbose
        self.config = FakeConfig()
        self._host, self._family = _loopback(host)
        self._port = port
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._templates: dict[str, dict[str, Any]] = {}
        for template_id, template in (known_templates or {}).items():
            self.add_template(template_id, template)
        self._pods: dict[str, _Pod] = {}
        self._log: list[RequestRecord] = []
        self._meter = QuotaMeter(parse_policy(self.config.rate_limit_policy))
        self._meter_policy = self.config.rate_limit_policy
        self._rate_limited = {"quota": 0, "forced": 0}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> FakeRunPod:
        """Bind and serve in a background thread."""
        if self._server is not None:
            return self
        server_class = _Server6 if self._family == socket.AF_INET6 else _Server
        self._server = server_class((self._host, self._port), _Handler)
        self._server.fake = self
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-runpod", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; sleeping (slow) answers are woken and connections close."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeRunPod:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL: clients call `{url}/v2/pods`."""
        host = f"[{self._host}]" if self._family == socket.AF_INET6 else self._host
        return f"http://{host}:{self.port}"

    # control

    def configure(self, **changes: Any) -> None:
        """Set switches (`FakeConfig` field names); raises FakeConfigError, changing nothing, on a bad one."""
        values, errors = _coerce_config(changes)
        if errors:
            raise FakeConfigError(errors)
        with self._lock:
            for name, value in values.items():
                setattr(self.config, name, value)
            if _QUOTA_FIELDS & set(values):
                self._restart_quota()

    def reset(self) -> None:
        """Forget pods, requests and quota counts; switches back to defaults. The api key and templates stay."""
        with self._lock:
            self.config = FakeConfig()
            self._pods.clear()
            self._log.clear()
            self._restart_quota()
            self._rate_limited = {"quota": 0, "forced": 0}

    def _restart_quota(self) -> None:
        """Fresh windows (from now) for the configured policy, so a test's quota starts from zero."""
        self._meter.restart(parse_policy(self.config.rate_limit_policy))
        self._meter_policy = self.config.rate_limit_policy

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    def add_template(self, template_id: str, template: Mapping[str, Any] | None = None) -> None:
        """Make `template_id` known (fields as in RunPod's Template schema; missing ones get defaults)."""
        with self._lock:
            self._templates[template_id] = _template_with_defaults(template_id, template or {})

    @property
    def templates(self) -> dict[str, dict[str, Any]]:
        """Known templates by id, with defaults filled in (a copy)."""
        with self._lock:
            return copy.deepcopy(self._templates)

    def set_pod_status(self, pod_id: str, status: str) -> dict[str, Any]:
        """Force a pod's status (e.g. EXITED or ERROR, as if it died); TERMINATED deletes it."""
        if status not in POD_STATUSES:
            raise ValueError(f"status must be one of {POD_STATUSES}")
        with self._lock:
            pod = self._pods.get(pod_id)
            if pod is None or pod.deleted:
                raise KeyError(pod_id)
            pod.settle()
            if status == "TERMINATED":
                pod.deleted = True
                pod.terminated_shown = True
                return pod.render("TERMINATED")
            pod.enter(status)
            pod.status_pinned = True
            return pod.render()

    def append_pod_log(self, pod_id: str, *lines: str, source: str = "container") -> list[dict[str, Any]]:
        """Lines the pod printed now (`container`; `system`: its host wrote them), as logged events."""
        if source not in LOG_SOURCES:
            raise ValueError(f"source must be one of {LOG_SOURCES}")
        with self._lock:
            pod = self._pods.get(pod_id)
            if pod is None or pod.deleted:
                raise KeyError(pod_id)
            pod.settle()
            now = datetime.now(UTC)
            return [event.to_json() for line in lines for event in pod.log.append(source, line, now)]

    def age_pods(self, seconds: float, pod_id: str | None = None) -> list[dict[str, Any]]:
        """Move live pods (or one) `seconds` further into their lives at once, as if created that much
        earlier: a timed boot, a late boot failure or a long uptime without waiting. Their Pod objects after."""
        if not (_is_number(seconds) and seconds >= 0):
            raise ValueError("seconds: want a number >= 0")
        with self._lock:
            aged = [pod for pod in self._pods.values() if not pod.deleted and pod_id in (None, pod.id)]
            if pod_id is not None and not aged:
                raise KeyError(pod_id)
            for pod in aged:
                pod.age(float(seconds))
                pod.settle()
            return [pod.render() for pod in aged]

    def pod_logs(self, pod_id: str) -> list[dict[str, Any]]:
        """Every log event of a pod, deleted or not (`{"id", "ts", "source", "line"}`), oldest first."""
        with self._lock:
            pod = self._pods.get(pod_id)
            if pod is None:
                raise KeyError(pod_id)
            pod.settle()
            return [event.to_json() for event in pod.log.events]

    @property
    def pods(self) -> dict[str, dict[str, Any]]:
        """Live (listed) pods by id, as Pod objects. Reading them does not move a pod that reads move;
        a pod that time moves shows where time has taken it."""
        with self._lock:
            shown = {}
            for pod in self._pods.values():
                if not pod.deleted:
                    pod.settle()
                    shown[pod.id] = pod.render()
            return shown

    @property
    def rate_limited(self) -> dict[str, int]:
        """429s answered so far: `quota` (enforce_quota refused the request), `forced` (rate_limit_next*)."""
        with self._lock:
            return dict(self._rate_limited)

    @property
    def deleted_pod_ids(self) -> list[str]:
        with self._lock:
            return [pod.id for pod in self._pods.values() if pod.deleted]

    @property
    def request_log(self) -> list[RequestRecord]:
        """API requests so far, oldest first (a copy)."""
        with self._lock:
            return copy.deepcopy(self._log)

    def requests_to(self, method: str, path: str) -> list[RequestRecord]:
        """Logged requests with this method and exact path."""
        return [record for record in self.request_log if record["method"] == method and record["path"] == path]

    def state(self) -> dict[str, Any]:
        """What `GET /_fake/state` answers."""
        with self._lock:
            return {
                "pods": list(self.pods.values()),
                "deletedPodIds": self.deleted_pod_ids,
                "requests": self.request_log,
                "config": self.config.to_json(),
                "rateLimited": dict(self._rate_limited),
                "quota": {
                    "policy": self.config.rate_limit_policy,
                    "enforced": self.config.enforce_quota,
                    "windows": self._meter.snapshot(self.api_key),
                },
            }

    # request handling

    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> _Reply:
        """Answer one request (the HTTP handler's entry point)."""
        parts = urlsplit(target)
        path = parts.path
        if path == "/_fake" or path.startswith("/_fake/"):
            return self._handle_control(method, path, body)
        parsed = _parse_body(body)
        reply, slow = self._handle_api(method, path, parts.query, headers, body, parsed)
        with self._lock:
            self._log.append(
                RequestRecord(
                    method=method,
                    path=path,
                    query=parts.query,
                    user_agent=headers.get("User-Agent"),
                    has_authorization=headers.get("Authorization") is not None,
                    authorized=self._authorized(headers),
                    content_type=headers.get("Content-Type"),
                    body=raw_text(body) if isinstance(parsed, _Unparsable) else parsed,
                    status=reply.status,
                )
            )
        if slow > 0:
            self._stopping.wait(slow)
        return reply

    def _authorized(self, headers: Headers) -> bool:
        return self._bearer(headers) == self.api_key

    @staticmethod
    def _bearer(headers: Headers) -> str | None:
        value = headers.get("Authorization") or ""
        scheme, _, token = value.strip().partition(" ")
        return token.strip() or None if scheme.lower() == "bearer" else None

    def _handle_api(
        self, method: str, path: str, query: str, headers: Headers, raw: bytes, body: Any
    ) -> tuple[_Reply, float]:
        with self._lock:
            config = self.config
            slow = config.slow_seconds
            # Cloudflare answers before the API sees the request.
            if not (headers.get("User-Agent") or "").strip():
                return _Reply(403, CLOUDFLARE_1010_BODY.encode(), "text/plain; charset=UTF-8"), slow
            token = self._bearer(headers)
            if token is None:
                return _problem(401, "missing bearer token"), slow
            if token != self.api_key:
                return _problem(401, "invalid bearer token"), slow
            if self._meter_policy != config.rate_limit_policy:  # set by assignment rather than configure
                self._restart_quota()
            exhausted = self._meter.exhausted(token) if config.enforce_quota else []
            if exhausted:
                window, wait = max(exhausted, key=lambda item: item[1])
                reply = _problem(429, f"rate limit exceeded for the {window.name} window", Retry_After=str(wait))
                self._rate_limited["quota"] += 1
            else:
                self._meter.count(token)
                reply, slow_extra = self._route(method, path, query, headers, raw, body)
                slow += slow_extra
            reply.headers.setdefault("RateLimit", self._meter.header(token))
            reply.headers["RateLimit-Policy"] = config.rate_limit_policy
            return reply, slow

    def _route(
        self, method: str, path: str, query: str, headers: Headers, raw: bytes, body: Any
    ) -> tuple[_Reply, float]:
        config = self.config
        if config.rate_limit_next > 0:
            config.rate_limit_next -= 1
            return self._too_many(), 0.0
        if path == "/v2/pods" and method == "POST":
            return self._create(raw, body), config.slow_creates_seconds
        if path == "/v2/pods" and method == "GET":
            return self._list(), config.slow_lists_seconds
        match = _POD_PATH.match(path)
        if match and method == "GET":
            return self._get(match.group(1)), config.slow_gets_seconds
        if match and method == "DELETE":
            return self._delete(match.group(1)), config.slow_deletes_seconds
        if method == "GET":
            served = self._route_reads(path, parse_qs(query, keep_blank_values=True), headers)
            if served is not None:
                return served, 0.0
        for pattern, methods in _SPEC_ROUTES:
            if pattern.match(path):
                if method in methods:
                    return _problem(501, f"{method} {path} is not implemented by the fake RunPod"), 0.0
                return _problem(
                    405, "The requested method is not allowed for this path.", Allow=", ".join(methods)
                ), 0.0
        return _problem(404, "resource not found"), 0.0

    def _route_reads(self, path: str, values: dict[str, list[str]], headers: Headers) -> _Reply | None:
        """getPodLogs and the catalog; None for any other path."""
        if (match := _POD_LOGS_PATH.match(path)) is not None:
            return self._logs(unquote(match.group(1)), values, headers)
        catalog = self._catalog()
        if path == "/v2/catalog/gpus" or (match := _GPU_PATH.match(path)) is not None:
            gpu_query = parse_gpu_query(values)
            if isinstance(gpu_query, QueryProblem):
                return _problem(gpu_query.status, gpu_query.detail, gpu_query.errors)
            if match is None:
                return _json_reply(200, {"gpus": catalog.gpu_types(gpu_query)})
            gpu_id = unquote(match.group(1))
            if not catalog.knows_gpu(gpu_id):
                return _problem(404, "GPU type not found")
            return _json_reply(200, catalog.gpu_type(gpu_id, gpu_query))
        if path == "/v2/catalog/datacenters" or (match := _DATA_CENTER_PATH.match(path)) is not None:
            dc_query = parse_data_center_query(values, filters=match is None)
            if isinstance(dc_query, QueryProblem):
                return _problem(dc_query.status, dc_query.detail, dc_query.errors)
            if match is None:
                return _json_reply(200, {"dataCenters": catalog.data_centers(dc_query)})
            dc_id = unquote(match.group(1))
            if not catalog.knows_data_center(dc_id):
                return _problem(404, "data center not found")
            return _json_reply(200, catalog.data_center(dc_id, dc_query))
        return None

    def _catalog(self) -> Catalog:
        config = self.config
        return Catalog(config.gpu_prices, config.community_gpu_prices, config.default_gpu_price, config.data_centers)

    def _logs(self, pod_id: str, values: dict[str, list[str]], headers: Headers) -> _Reply:
        pod = self._pods.get(pod_id)
        if pod is None or pod.deleted:
            return _problem(404, "pod not found")
        query = parse_log_query(values, headers.get("Last-Event-ID"))
        if isinstance(query, list):
            return _problem(422, VALIDATION_DETAIL, query)
        pod.settle()
        backfill = pod.log.backfill(query)
        reply = _Reply(200, b"".join(event.sse() for event in backfill), "text/event-stream", dict(SSE_HEADERS))
        seconds = self.config.logs_stream_seconds
        if seconds is None or seconds > 0:
            reply.stream = self._follow_logs(pod, query.source, pod.log.last_seq, seconds)
        return reply

    def _follow_logs(self, pod: _Pod, source: str | None, cursor: int, seconds: float | None) -> Iterator[bytes]:
        """The live part of a log stream: new events as they come, an empty piece on each idle tick."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self._stopping.is_set():
            with self._lock:
                if pod.deleted or self._pods.get(pod.id) is not pod:
                    return
                pod.settle()
                fresh: list[LogEvent] = pod.log.after(cursor, source)
                cursor = pod.log.last_seq
            yield b"".join(event.sse() for event in fresh)
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return
            self._stopping.wait(left)

    def _too_many(self) -> _Reply:
        """A forced 429 (rate_limit_next*): the policy's first window shown used up for Retry-After seconds."""
        wait = self.config.rate_limit_retry_after
        window = self._meter.windows[0].name
        reply = _problem(429, f"rate limit exceeded for the {window} window")
        reply.headers["Retry-After"] = str(wait)
        reply.headers["RateLimit"] = self._meter.header(self.api_key, exhausted_for=(window, wait))
        self._rate_limited["forced"] += 1
        return reply

    def _fail(self) -> _Reply:
        status = self.config.fail_status
        return _problem(status, _FAIL_DETAILS.get(status, "upstream failure"))

    def _create(self, raw: bytes, body: Any) -> _Reply:
        config = self.config
        if config.rate_limit_next_creates > 0:
            config.rate_limit_next_creates -= 1
            return self._too_many()
        if not raw.strip():
            return _problem(400, "request body is required")
        if isinstance(body, _Unparsable):
            return _problem(400, f"request body is not valid JSON: {body.reason}")
        errors = validate_create_pod_request(body)
        if errors:
            return _problem(422, VALIDATION_DETAIL, errors)
        assert isinstance(body, dict)
        rule = _rule_violation(body)
        if rule is not None:
            return _problem(400, rule)
        template: dict[str, Any] | None = None
        if "templateId" in body:
            template = self._templates.get(body["templateId"])
            if template is None:
                return _problem(404, f"template {body['templateId']!r} not found")
            if template.get("serverless"):
                return _problem(
                    422,
                    VALIDATION_DETAIL,
                    [f"$.templateId: template '{body['templateId']}' is a serverless template; a pod needs a pod one"],
                )
        compute: dict[str, Any] = body["gpu"] if "gpu" in body else body["cpu"]
        compute_id = str(compute["id"])
        if config.fail_next_creates > 0:
            config.fail_next_creates -= 1
            return self._fail()
        if config.insufficient_balance:
            return _problem(402, INSUFFICIENT_BALANCE_DETAIL)
        if compute_id in config.forbidden_gpu_ids:
            return _problem(403, "access denied")
        if compute_id in config.no_capacity_gpu_ids:
            return _problem(400, CAPACITY_DETAIL)
        requested = [str(dc) for dc in body.get("dataCenterIds") or []]
        gpu_count = int(compute.get("count", 1)) if "gpu" in body else None
        data_center = self._catalog().place(compute_id, requested, gpu_count, body.get("cloud", "SECURE"))
        if data_center is None:
            return _problem(400, CAPACITY_DETAIL)
        pod = self._make_pod(body, template, data_center)
        self._pods[pod.id] = pod
        if config.create_500_but_running > 0:
            config.create_500_but_running -= 1
            pod.run()
            return _problem(500, "internal server error")
        return _json_reply(201, pod.render())

    def _boot_outcome(self, compute_id: str, template_id: str | None) -> str:
        """How the pod's boot ends (one of _BOOT_OUTCOMES); ERROR wins over stuck."""
        config = self.config
        if config.fail_boot_next > 0:
            config.fail_boot_next -= 1
            return "error"
        if compute_id in config.fail_boot_gpu_ids or template_id in config.fail_boot_template_ids:
            return "error"
        if config.stuck_starting_next > 0:
            config.stuck_starting_next -= 1
            return "stuck"
        if compute_id in config.stuck_starting_gpu_ids or template_id in config.stuck_starting_template_ids:
            return "stuck"
        return "run"

    def _make_pod(self, body: dict[str, Any], template: dict[str, Any] | None, data_center: str) -> _Pod:
        config = self.config
        cloud = body.get("cloud", "SECURE")
        base = template or {}
        pod_id = _new_pod_id()
        while pod_id in self._pods:
            pod_id = _new_pod_id()
        env = {**base.get("env", {}), **body.get("env", {})}
        if body.get("startJupyter", base.get("startJupyter", False)):
            env.setdefault("JUPYTER_PASSWORD", secrets.token_urlsafe(12))
        ports = list(body.get("ports", base.get("ports", [])))
        gpu = cpu = None
        cuda: str | None = None
        if "gpu" in body:
            requested = body["gpu"]
            count = int(requested.get("count", 1))
            gpu = {"id": requested["id"], "count": count}
            cost = self._catalog().price(requested["id"], cloud) * count * config.cost_markup
            if "allowedCudaVersions" in requested or "minCudaVersion" in requested:
                allowed, floor = requested.get("allowedCudaVersions") or [], requested.get("minCudaVersion")
            else:
                allowed, floor = base.get("allowedCudaVersions") or [], None
            if allowed:
                cuda = max(allowed, key=_cuda_key)
            elif floor is not None and _cuda_key(floor) > _cuda_key(DEFAULT_CUDA_VERSION):
                cuda = floor
            else:
                cuda = DEFAULT_CUDA_VERSION
            mounts = copy.deepcopy(body.get("mounts", base.get("mounts") or {}))
        else:
            vcpus = int(body["cpu"]["vcpuCount"])
            cpu = {"id": body["cpu"]["id"], "vcpuCount": vcpus, "memory": vcpus * 4}
            cost = config.cpu_price_per_vcpu * vcpus * config.cost_markup
            mounts = copy.deepcopy(body.get("mounts", {}))  # CPU pods do not inherit a persistent mount
        compute_id = str((gpu or cpu or {})["id"])
        pod = _Pod(
            id=pod_id,
            name=body["name"],
            image=body.get("image", base.get("image", DEFAULT_IMAGE)),
            args=body.get("args", base.get("args", "")),
            disk=int(body.get("disk", base.get("disk", 50))),
            ports=ports,
            env=env,
            registry=body.get("registry", base.get("registry")),
            mounts=mounts,
            gpu=gpu,
            cpu=cpu,
            cloud=cloud,
            data_center_id=data_center,
            cuda_version=cuda,
            cost=round(cost, 4),
            global_networking=bool(body.get("globalNetworking", False)),
            created_at=datetime.now(UTC),
            running_after_gets=config.running_after_gets,
            ssh_user=f"{pod_id}-{secrets.token_hex(4)}",
            public_ip=f"203.0.113.{secrets.randbelow(250) + 2}",
            public_ports={
                int(spec.split("/")[0]): 20000 + secrets.randbelow(40000) for spec in ports if spec.endswith("/tcp")
            },
            provisioning_seconds=config.provisioning_seconds,
            starting_seconds=config.starting_seconds,
            outcome=self._boot_outcome(compute_id, body.get("templateId")),
            fail_after_seconds=config.fail_boot_after_seconds,
        )
        if gpu is not None:
            compute = f"{gpu['count']} x {gpu['id']}"
        else:
            compute = f"{cpu['vcpuCount']} vCPU {cpu['id']}" if cpu else "?"
        pod.log.append("system", f"Provisioning pod {pod_id} ({compute}) in {data_center}", pod.created_at)
        return pod

    def _list(self) -> _Reply:
        if self.config.fail_next_lists > 0:
            self.config.fail_next_lists -= 1
            return self._fail()
        shown = []
        for pod in self._pods.values():
            if not pod.deleted:
                pod.advance()
                shown.append(pod.render())
        return _json_reply(200, {"pods": shown})

    def _get(self, pod_id: str) -> _Reply:
        if self.config.fail_next_gets > 0:
            self.config.fail_next_gets -= 1
            return self._fail()
        pod = self._pods.get(pod_id)
        if pod is None:
            return _problem(404, "pod not found")
        if not pod.deleted:
            pod.advance()
            return _json_reply(200, pod.render())
        if pod.lag_reads_left > 0:
            pod.lag_reads_left -= 1
            return _json_reply(200, pod.render("RUNNING"))
        if not pod.terminated_shown:
            pod.terminated_shown = True
            return _json_reply(200, pod.render("TERMINATED"))
        return _problem(404, "pod not found")

    def _delete(self, pod_id: str) -> _Reply:
        config = self.config
        if config.fail_next_deletes > 0:
            config.fail_next_deletes -= 1
            return self._fail()
        pod = self._pods.get(pod_id)
        if pod is None or pod.deleted:
            return _problem(404, "pod not found")
        pod.deleted = True
        pod.lag_reads_left = config.delete_lag_reads
        pod.terminated_shown = config.delete_lag_reads == 0
        if pod.started_at is None:
            pod.started_at = datetime.now(UTC)
        if config.delete_answers_404 > 0:
            config.delete_answers_404 -= 1
            return _problem(404, "pod not found")
        return _Reply(204)

    def _handle_control(self, method: str, path: str, raw: bytes) -> _Reply:
        status_match = re.fullmatch(r"/_fake/pods/([^/]+)/status", path)
        logs_match = re.fullmatch(r"/_fake/pods/([^/]+)/logs", path)
        routes = {
            "/_fake/config": ("POST",),
            "/_fake/reset": ("POST",),
            "/_fake/state": ("GET",),
            "/_fake/age": ("POST",),
        }
        allowed = ("POST",) if status_match else ("GET", "POST") if logs_match else routes.get(path)
        if allowed is None:
            return _problem(404, "resource not found")
        if method not in allowed:
            return _problem(405, "The requested method is not allowed for this path.", Allow=", ".join(allowed))
        if path == "/_fake/state":
            return _json_reply(200, self.state())
        if path == "/_fake/reset":
            self.reset()
            return _Reply(204)
        if logs_match and method == "GET":
            try:
                return _json_reply(200, {"events": self.pod_logs(unquote(logs_match.group(1)))})
            except KeyError:
                return _problem(404, "pod not found")
        body = _parse_body(raw)
        if not isinstance(body, dict):
            return _problem(400, "want a JSON object")
        if path == "/_fake/age":
            seconds, pod_id = body.get("seconds"), body.get("podId")
            if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
                return _problem(400, 'want {"seconds": <number >= 0>[, "podId": <pod id>]}')
            if not isinstance(pod_id, str | None):
                return _problem(400, 'want {"seconds": <number >= 0>[, "podId": <pod id>]}')
            try:
                return _json_reply(200, {"pods": self.age_pods(seconds, pod_id)})
            except KeyError:
                return _problem(404, "pod not found")
            except ValueError as error:
                return _problem(400, str(error))
        if logs_match:
            lines, source = body.get("lines"), body.get("source", "container")
            if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
                return _problem(400, 'want {"lines": [strings], "source": "container" or "system"}')
            try:
                events = self.append_pod_log(unquote(logs_match.group(1)), *lines, source=str(source))
            except KeyError:
                return _problem(404, "pod not found")
            except ValueError as error:
                return _problem(400, str(error))
            return _json_reply(200, {"events": events})
        if status_match:
            try:
                return _json_reply(200, self.set_pod_status(status_match.group(1), str(body.get("status"))))
            except KeyError:
                return _problem(404, "pod not found")
            except ValueError as error:
                return _problem(400, str(error))
        try:
            self.configure(**body)
        except FakeConfigError as error:
            return _problem(400, "invalid fake configuration", error.errors)
        return _json_reply(200, {"config": self.config.to_json()})


@dataclass
class _Unparsable:
    reason: str


def _parse_body(raw: bytes) -> Any:
    """The JSON body; None when empty; `_Unparsable` when not JSON (logged as its text)."""
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        return _Unparsable(str(error))


def raw_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _loopback(host: str) -> tuple[str, socket.AddressFamily]:
    """The address to bind, refusing anything but loopback."""
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"refusing to bind {host!r}: give a loopback address such as 127.0.0.1") from None
    if not address.is_loopback:
        raise ValueError(f"refusing to bind {host!r}: the fake RunPod serves on loopback only")
    return str(address), socket.AF_INET6 if address.version == 6 else socket.AF_INET


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeRunPod


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = 30  # idle keep-alive connections end
    # Headers and body go out as two writes; with Nagle on, the second waits for the client's delayed ACK
    # (~40 ms per answer on Linux), which no real API adds.
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return "cloudflare"

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def do_PATCH(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def do_OPTIONS(self) -> None:
        self._answer()

    def _answer(self) -> None:
        fake = self.server.fake
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self._write(_problem(400, "unreadable request body"))
            return
        reply = fake.handle(self.command, self.path, self.headers, body)
        if fake._stopping.is_set():
            self.close_connection = True
        self._write(reply)

    def _read_body(self) -> bytes:
        """The whole body (Content-Length or chunked), so a kept-alive connection stays in step."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers, then the blank line
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        return self.rfile.read(length) if length else b""

    def _write(self, reply: _Reply) -> None:
        try:
            self.send_response(reply.status)
            if reply.content_type:
                self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                if not (name == "Connection" and self.close_connection):
                    self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            if reply.stream is not None and self.command != "HEAD":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._stream(reply.body, reply.stream)
                return
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            if reply.body and self.command != "HEAD":
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. timed out)
            self.close_connection = True
        finally:
            if reply.stream is not None:
                close = getattr(reply.stream, "close", None)
                if close is not None:
                    close()

    def _stream(self, first: bytes, rest: Iterator[bytes]) -> None:
        """A chunked body: `first`, then each piece of `rest` as it comes, until it ends or the client leaves."""
        if first:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
        for piece in rest:
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            elif self._client_gone():
                self.close_connection = True
                return
        self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        """The peer closed its end (a readable socket with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.fake.verbose:
            super().log_message(format, *args)


def start_fake_runpod(
    api_key: str = "test-key",
    known_templates: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
) -> FakeRunPod:
    """A started fake on `host:port` (port 0: any free one); `.url` is its base URL."""
    return FakeRunPod(api_key, known_templates, host=host, port=port).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.runpod", description="Serve a fake RunPod REST API v2 (pods) on loopback."
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8089, help="port (0: any free one; default 8089)")
    parser.add_argument("--api-key", default="test-key", help="the bearer token to accept (default test-key)")
    parser.add_argument("--template", action="append", default=[], metavar="ID", help="a known template id")
    parser.add_argument("--running-after-gets", type=int, default=0, metavar="N")
    parser.add_argument(
        "--provisioning-seconds", type=float, default=0.0, metavar="S", help="boot by time: PROVISIONING"
    )
    parser.add_argument("--starting-seconds", type=float, default=0.0, metavar="S", help="boot by time: STARTING")
    parser.add_argument(
        "--rate-limit-policy", default=RATE_LIMIT_POLICY, metavar="POLICY", help="e.g. '\"minute\";q=30;w=10'"
    )
    parser.add_argument("--enforce-quota", action="store_true", help="answer 429 past the rate-limit policy")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = parser.parse_args(argv)
    try:
        fake = FakeRunPod(args.api_key, {template: {} for template in args.template}, host=args.host, port=args.port)
    except ValueError as error:
        parser.error(str(error))
    fake.verbose = args.verbose
    try:
        fake.configure(
            running_after_gets=args.running_after_gets,
            provisioning_seconds=args.provisioning_seconds,
            starting_seconds=args.starting_seconds,
            rate_limit_policy=args.rate_limit_policy,
            enforce_quota=args.enforce_quota,
        )
    except FakeConfigError as error:
        parser.error(str(error))
    done = threading.Event()

    def finish(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    fake.start()
    print(fake.url, flush=True)
    print(f"fake RunPod: api key {args.api_key!r}, templates {args.template}; control at /_fake/", file=sys.stderr)
    done.wait()
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
