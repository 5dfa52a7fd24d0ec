"""The `runpod` driver: one GPU pod per lease through RunPod's REST API v2.

This module is the only code that speaks RunPod's API. Create follows RunPod's documented retry
table (createPod): 422 never retried; 400 and 403 move to the next GPU type; 402 stops; 429 waits
`Retry-After`; 5xx and timeouts retry with backoff. Because a create that failed or timed out may
still have made a pod, the pod is looked up by its name (`lease-<id>`) before any retry and before
giving up, so a billing pod is never left without a lease.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scheduler.costs import money
from scheduler.deadline import Deadline, or_never
from scheduler.models import GpuClass, Lease, WorkerKind, format_time
from scheduler.observability.log import Logger
from scheduler.providers.base import (
    WORKER_NAME_PREFIX,
    ManagedWorker,
    PriceAboveCeiling,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    Readiness,
    ReadinessState,
    WorkerGone,
    WorkerOutcomeUnknown,
    above_ceiling,
    worker_name,
)
from scheduler.providers.runpod import NAME, RunPodSettings
from scheduler.providers.runpod.api import RetryPolicy, RunPodApi, RunPodResponse, _Transient
from scheduler.providers.runpod.catalog import CATALOG, CatalogCache, Prices, parse_prices
from scheduler.providers.runpod.logs import busy_for, first_byte_timeout, pod_log_request, read_pod_logs
from scheduler.providers.runpod.quota import CREATE, READ, RELEASE, RequestBudget
from scheduler.worker_logs import LogLine, LogQuery

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.request_models import LeaseRequest

logger = Logger(child=True)

# Of a create's deadline, what the create needs once it has its request from the API budget: its answer
# (a few seconds) and, if that fails, the listing that adopts a pod it made anyway. A wait for the
# budget ends this long before the deadline or is not begun (the activation write that follows is in
# the route's own reserve, runtime.REQUEST_RESERVE_SECONDS).
CREATE_NEEDS_SECONDS = 5.0

_GONE_STATUSES = frozenset({"TERMINATED"})
# A booting pod in one of these will never serve its lease.
_BOOT_FAILED_STATUSES = frozenset({"ERROR", "EXITED", "TERMINATED"})


def from_settings(settings: RunPodSettings, budget: RequestBudget | None = None) -> RunPodProvider:
    """The driver, active only when an API key is configured (env locally, Secrets Manager in AWS)."""
    if settings.runpod_api_key is not None:
        key = settings.runpod_api_key.get_secret_value()
        api_key: Callable[[], str | None] = lambda: key  # noqa: E731
    elif settings.runpod_api_key_secret_arn:
        api_key = _secret_reader(settings.runpod_api_key_secret_arn)
    else:
        api_key = lambda: None  # noqa: E731
    return RunPodProvider(
        api=RunPodApi(settings.runpod_api_url, api_key, budget=budget, metrics=_emf()),
        templates={
            WorkerKind.RENDERER: settings.runpod_renderer_template,
            WorkerKind.ANIM: settings.runpod_anim_template,
        },
        gpu_types={
            GpuClass.ENTRY: settings.runpod_gpu_types_entry,
            GpuClass.MID: settings.runpod_gpu_types_mid,
            GpuClass.HIGH: settings.runpod_gpu_types_high,
        },
        http_port=settings.runpod_http_port,
        configured=settings.runpod_api_key is not None or bool(settings.runpod_api_key_secret_arn),
        cheapest_first=settings.runpod_gpu_order == "cheapest",
        regions=dict(settings.runpod_regions),
    )


def _emf() -> Any:
    from scheduler.observability.metrics import EmfMetrics

    return EmfMetrics()


def _secret_reader(secret_arn: str) -> Callable[[], str | None]:
    def read() -> str | None:
        from aws_lambda_powertools.utilities import parameters

        # Cached for five minutes: a rotated key takes effect without a redeploy.
        return str(parameters.get_secret(secret_arn, max_age=300))

    return read


class RunPodProvider(Provider):
    """GPU pods on RunPod, named `lease-<lease_id>` so the reconciler can find them."""

    name = NAME

    def __init__(
        self,
        api: RunPodApi,
        templates: Mapping[WorkerKind, str | None],
        gpu_types: Mapping[GpuClass, tuple[str, ...]],
        http_port: int,
        configured: bool = True,
        retry: RetryPolicy | None = None,
        cheapest_first: bool = False,
        regions: Mapping[str, tuple[str, ...]] | None = None,
        catalog: CatalogCache | None = None,
    ) -> None:
        self._api = api
        self._templates = dict(templates)
        self._gpu_types = dict(gpu_types)
        self._http_port = http_port
        self._configured = configured
        self._retry = retry or RetryPolicy()
        self._cheapest_first = cheapest_first
        self._regions = dict(regions or {})
        self._catalog = catalog or CATALOG
        # One listing, asked for after a DELETE was answered, confirms every pod it no longer shows:
        # concurrent releases (the sweep's) share it instead of a GET loop per pod.
        self._listing_lock = threading.Lock()
        self._listing: tuple[float, frozenset[str]] | None = None
        if not configured:
            logger.warning("runpod is in PROVIDERS but no API key is configured; it will serve nothing")

    def available(self, request: LeaseRequest) -> bool:
        """GPU leases of a kind with a template, a class with GPU types, and an API key."""
        return self._configured and bool(self._templates.get(request.kind)) and bool(self._gpu_types.get(request.gpu))

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        """Create the pod on the first GPU type RunPod can place within the request's price ceiling and
        region, per RunPod's retry table, within `deadline`."""
        name = worker_name(lease.lease_id)
        body_without_gpu: dict[str, Any] = {
            "name": name,
            "templateId": self._templates[lease.kind],
            "env": {**env, "LEASE_ID": lease.lease_id, "LEASE_EXPIRES_AT": format_time(lease.expires_at)},
        }
        if lease.region is not None and lease.region in self._regions:
            body_without_gpu["dataCenterIds"] = list(self._regions[lease.region])
        retry_until = min(time.monotonic() + self._retry.total_seconds, or_never(deadline).at)
        gpu_ids = list(self._gpu_types.get(lease.gpu, ()))
        prices = self._prices(retry_until) if lease.max_cost_per_hour is not None or self._cheapest_first else None
        if prices is not None:
            gpu_ids = prices.ordered(gpu_ids, self._cheapest_first)
        refusals: list[str] = []
        seen: list[float] = []
        for gpu_id in gpu_ids:
            listed = prices.of(gpu_id) if prices is not None else None
            if listed is not None:
                seen.append(listed)
            if listed is not None and above_ceiling(listed, lease):
                refusals.append(f"{gpu_id}: {money(listed)} USD/h in RunPod's catalog, above max_cost_per_hour")
                continue
            if time.monotonic() >= retry_until:
                raise ProviderUnreachable(
                    f"RunPod: no time left to try {gpu_id} ({' | '.join(refusals) or 'none tried'})"
                )
            body = {**body_without_gpu, "gpu": {"id": gpu_id, "count": 1}}
            answer = self._create_one(name, body, retry_until)
            if isinstance(answer, ProvisionedWorker) and above_ceiling(answer.cost_per_hour, lease):
                seen.append(answer.cost_per_hour or 0.0)
                self._delete_over_ceiling(lease.lease_id, answer, deadline)
                refusals.append(
                    f"{gpu_id}: the pod bills {money(answer.cost_per_hour or 0.0)} USD/h, above max_cost_per_hour"
                )
                continue
            if isinstance(answer, ProvisionedWorker):
                return answer
            refusals.append(f"{gpu_id}: {answer}")
        message = f"RunPod could not place any GPU type for {lease.gpu}: {' | '.join(refusals) or 'none configured'}"
        if lease.max_cost_per_hour is not None and any("above max_cost_per_hour" in why for why in refusals):
            raise PriceAboveCeiling(message, min(seen) if seen else None)
        raise ProviderCapacityError(message)

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        """The dearest catalog price among the class's GPU types that fit the ceiling (the ceiling itself
        when a type has no listed price; None when the catalog cannot be read and there is no ceiling)."""
        ceiling = request.max_cost_per_hour
        try:
            prices = self._prices(min(time.monotonic() + 5.0, or_never(deadline).at))
        except Exception:  # noqa: BLE001 - an estimate: never fail the acquire over it
            prices = None
        if prices is None:
            return ceiling
        listed = [prices.of(gpu_id) for gpu_id in self._gpu_types.get(request.gpu, ())]
        if any(price is None for price in listed):
            return ceiling
        fitting = [price for price in listed if price is not None and (ceiling is None or price <= ceiling)]
        return max(fitting) if fitting else ceiling

    def regions(self) -> tuple[str, ...] | None:
        """RUNPOD_REGIONS' names (None when none are configured: a request's region is not used)."""
        return tuple(self._regions) or None

    def _prices(self, until: float) -> Prices | None:
        """The catalog's prices (cached per execution environment), None when RunPod will not say."""

        def fetch() -> Prices | None:
            try:
                response = self._api.call("GET", "/v2/catalog/gpus", until=until)
            except (_Transient, ProviderUnreachable) as error:
                logger.warning("RunPod's GPU catalog could not be read", extra={"error": str(error)})
                return None
            prices = parse_prices(response.body) if response.status == 200 else None
            if prices is None:
                logger.warning("RunPod's GPU catalog answered without prices", extra={"status": response.status})
            return prices

        return self._catalog.get(self._api.base_url, fetch)

    def _delete_over_ceiling(self, lease_id: str, worker: ProvisionedWorker, deadline: Deadline | None) -> None:
        """A pod that bills above the ceiling is removed at once (within the acquire's deadline); if that
        cannot be confirmed, the lease stays pending and the reconciler removes it."""
        logger.warning(
            "the pod bills above the request's ceiling; deleting it", extra={"pod": worker.token, "lease_id": lease_id}
        )
        try:
            self.release(lease_id, worker.token, deadline)
        except (ProviderRequestFailed, ProviderUnreachable) as error:
            raise WorkerOutcomeUnknown(
                f"RunPod pod {worker.token} bills above the ceiling and was not removed: {error}"
            ) from error

    def _create_one(self, name: str, body: dict[str, Any], deadline: float) -> ProvisionedWorker | str:
        """The worker, or why this GPU type was skipped; raises when no candidate can succeed."""
        attempt = 0
        while True:
            try:
                wait_until = deadline - CREATE_NEEDS_SECONDS
                response = self._api.call("POST", "/v2/pods", body, deadline, CREATE, wait_until=wait_until)
            except _Transient as error:
                if not error.sent:  # the budget already waited all this create may: nothing to retry
                    raise ProviderUnreachable(f"RunPod did not create the pod: {error}") from error
                # The create may have happened anyway: adopt that pod rather than make a second.
                existing = self._find_by_name(name)
                if existing is not None:
                    logger.warning("create failed but the pod exists; adopting it", extra={"pod": existing["id"]})
                    return self._worker(existing)
                delay = error.delay if error.delay is not None else self._retry.backoff(attempt)
                attempt += 1
                if attempt >= self._retry.attempts or time.monotonic() + delay > deadline:
                    raise ProviderUnreachable(f"RunPod did not create the pod: {error}") from error
                self._retry.sleep(delay)
                continue
            status = response.status
            if status == 201 and isinstance(response.body, dict):
                return self._worker(response.body)
            if status in (400, 403):
                return f"HTTP {status} {response.detail}"
            if status == 402:
                raise ProviderRequestFailed(f"RunPod refused: insufficient account balance ({response.detail})")
            if status == 422:
                raise ProviderRequestFailed(
                    f"RunPod rejected the pod request as invalid (a bug on our side): {response.detail}"
                )
            if status == 401:
                raise ProviderRequestFailed("RunPod rejected the API key (401)")
            if status == 404:
                raise ProviderRequestFailed(f"RunPod does not know the template {body.get('templateId')!r}")
            raise ProviderRequestFailed(f"RunPod answered HTTP {status}: {response.detail}")

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        """Terminate the pod (all pods of the lease when no token) and confirm it is gone, by `deadline`:
        every call (the listing, the DELETE, the confirming listing) and every wait for the API budget
        ends by then, or the release fails (ProviderRequestFailed: its claim stays and the sweep retries)."""
        tokens = [token] if token else [pod["id"] for pod in self._pods_named(worker_name(lease_id), deadline)]
        for pod_id in tokens:
            response = self._idempotent("DELETE", f"/v2/pods/{pod_id}", within=deadline)
            if response.status not in (204, 404):
                raise ProviderRequestFailed(
                    f"RunPod would not terminate pod {pod_id}: HTTP {response.status} {response.detail}"
                )
            self._confirm_gone(pod_id, answered_at=time.monotonic(), within=deadline)

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every live pod named `lease-*`."""
        if not self._configured:
            return []
        return [
            ManagedWorker(
                lease_id=pod["name"].removeprefix(WORKER_NAME_PREFIX),
                token=pod["id"],
                created_at=_parse_time(pod.get("createdAt")),
            )
            for pod in self._list_pods(deadline)
            if str(pod.get("name", "")).startswith(WORKER_NAME_PREFIX)
        ]

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        """One getPod: ready once the pod is RUNNING with its HTTP port mapped; failed in ERROR/EXITED or gone."""
        response = self._idempotent("GET", f"/v2/pods/{token}", priority=READ, within=deadline)
        if response.status == 404:
            return Readiness.failed(f"the RunPod pod {token} no longer exists")
        if response.status != 200 or not isinstance(response.body, dict):
            raise ProviderRequestFailed(f"RunPod would not show pod {token}: HTTP {response.status} {response.detail}")
        return self.pod_readiness(response.body)

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        """One listPods for every booting pod (the sweep asks each minute; RunPod allows 60 requests a minute)."""
        if not workers or not self._configured:
            return {}
        response = self._idempotent("GET", "/v2/pods", priority=READ, within=deadline)
        if response.status != 200 or not isinstance(response.body, dict):
            raise ProviderRequestFailed(f"RunPod would not list pods: HTTP {response.status} {response.detail}")
        pods = {str(pod.get("id")): pod for pod in response.body.get("pods", []) if isinstance(pod, dict)}
        # A pod missing from the listing is not taken as failed here (a listing can lag a create); the
        # reconciler's ghost check or the ready timeout ends its lease.
        return {token: self.pod_readiness(pods[token]) for token in workers if token in pods}

    def pod_readiness(self, pod: Mapping[str, Any]) -> Readiness:
        """What a pod object says: RUNNING with `runtime.ports` mapping the HTTP port is ready."""
        status = str(pod.get("status", ""))
        if status in _BOOT_FAILED_STATUSES:
            return Readiness.failed(f"the RunPod pod {pod.get('id')} is {status} (it failed to boot)")
        if status != "RUNNING":
            return Readiness.starting(f"pod {status or 'status unknown'}")
        runtime = pod.get("runtime")
        ports = runtime.get("ports") if isinstance(runtime, dict) else None
        mapped = isinstance(ports, list) and any(
            isinstance(port, dict) and port.get("private") == self._http_port for port in ports
        )
        if not mapped:
            return Readiness.starting(f"pod RUNNING, port {self._http_port} not mapped yet")
        return Readiness.ready()

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        """The pod's log stream (container and system lines; getPodLogs); WorkerGone once RunPod forgets the pod."""
        deadline = or_never(deadline)
        pod_id = token
        if pod_id is None:
            pods = self._pods_named(worker_name(lease_id), deadline)
            if not pods:
                raise WorkerGone(f"RunPod holds no pod named {worker_name(lease_id)}")
            pod_id = str(pods[0]["id"])
        path, params = pod_log_request(pod_id, query)
        for attempt in range(self._retry.attempts):
            with self._api.stream(path, params, first_byte_timeout(deadline)) as response:
                wait = busy_for(response, attempt, self._retry.backoff)
                last = attempt + 1 >= self._retry.attempts
                if wait is None or last or wait > deadline.remaining() - 1.0:
                    return read_pod_logs(response, pod_id, query, deadline)  # a refusal raises, naming its status
            self._retry.sleep(wait)  # 429 or 5xx: as every other RunPod call, after Retry-After or a backoff
        raise ProviderRequestFailed(f"RunPod would not serve the logs of pod {pod_id}")

    def _worker(self, pod: Mapping[str, Any]) -> ProvisionedWorker:
        cost = pod.get("cost")
        return ProvisionedWorker(
            token=str(pod["id"]),
            endpoint=f"https://{pod['id']}-{self._http_port}.proxy.runpod.net",
            cost_per_hour=float(cost) if isinstance(cost, int | float) else None,
            ready=self.pod_readiness(pod).state is ReadinessState.READY,
        )

    def _confirm_gone(self, pod_id: str, answered_at: float, within: Deadline | None) -> None:
        """Gone once a listing asked for after the DELETE was answered no longer shows it (listPods leaves
        out terminated pods); one listing serves every release waiting at the time. Gives up after the
        policy's confirmation time or at the caller's deadline, whichever comes first."""
        confirm_by = or_never(within).sooner(self._retry.release_confirm_seconds)
        attempt = 0
        after = answered_at
        while True:
            if pod_id not in self._live_pod_ids(after, confirm_by):
                return
            after = time.monotonic()
            pause = min(1.0, 0.1 * 2**attempt)
            if confirm_by.remaining() < pause:
                raise ProviderRequestFailed(f"RunPod pod {pod_id} is still present after termination")
            self._retry.sleep(pause)
            attempt += 1

    def _live_pod_ids(self, after: float, within: Deadline | None = None) -> frozenset[str]:
        with self._listing_lock:
            if self._listing is None or self._listing[0] < after:
                asked_at = time.monotonic()
                self._listing = (asked_at, frozenset(str(pod.get("id")) for pod in self._list_pods(within)))
            return self._listing[1]

    def _find_by_name(self, name: str) -> dict[str, Any] | None:
        try:
            pods = self._pods_named(name)
        except ProviderRequestFailed:
            return None
        return pods[0] if pods else None

    def _pods_named(self, name: str, within: Deadline | None = None) -> list[dict[str, Any]]:
        return [pod for pod in self._list_pods(within) if pod.get("name") == name]

    def _list_pods(self, within: Deadline | None = None) -> list[dict[str, Any]]:
        response = self._idempotent("GET", "/v2/pods", within=within)
        if response.status != 200 or not isinstance(response.body, dict):
            raise ProviderRequestFailed(f"RunPod would not list pods: HTTP {response.status} {response.detail}")
        return [pod for pod in response.body.get("pods", []) if pod.get("status") not in _GONE_STATUSES]

    def _idempotent(
        self, method: str, path: str, priority: str = RELEASE, within: Deadline | None = None
    ) -> RunPodResponse:
        """A GET or DELETE, retried on 429/5xx/timeouts within the policy's bounds and the caller's deadline
        (`priority`: what the request may take of the account's budget)."""
        deadline = time.monotonic() + self._retry.total_seconds
        if within is not None:
            deadline = min(deadline, time.monotonic() + within.remaining())
        attempt = 0
        while True:
            try:
                return self._api.call(method, path, until=deadline if within is not None else None, priority=priority)
            except ProviderUnreachable as error:
                raise ProviderRequestFailed(str(error)) from error
            except _Transient as error:
                delay = error.delay if error.delay is not None else self._retry.backoff(attempt)
                attempt += 1
                if attempt >= self._retry.attempts or time.monotonic() + delay > deadline:
                    raise ProviderRequestFailed(f"RunPod is not answering: {error}") from error
                self._retry.sleep(delay)


def _parse_time(value: object) -> datetime:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(UTC)
