"""A function's dependencies: one `Runtime` per execution environment, each part built from the settings
when first used, each replaceable.

A handler module holds `runtime = Runtime.from_environment()` (warming at init what its first request
would otherwise build); a test replaces it in one line, `app.runtime = Runtime(settings, store=...,
providers=..., metrics=...)`, with no module reloads and no patched globals.
"""

from __future__ import annotations

import gc
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from scheduler.clock import Clock, utc_now
from scheduler.config import Settings, get_settings
from scheduler.deadline import Deadline, or_never

if TYPE_CHECKING:  # built where first used: each function imports only what its handler needs
    from scheduler.api.identity import Identity
    from scheduler.callers.model import Caller
    from scheduler.events.channels import Bus, DeliveryQueue
    from scheduler.handoff import Handoff
    from scheduler.idempotency import IdempotentAcquire
    from scheduler.leases.context import Context
    from scheduler.leases.liveness import ReadCheck
    from scheduler.leases.readiness import ReadinessPolicy
    from scheduler.limits import LeaseLimits
    from scheduler.observability.metrics import Metrics
    from scheduler.providers.base import Provider
    from scheduler.providers.configured import ConfiguredProviders
    from scheduler.store import LeaseStore
    from scheduler.store.callers import CallerStore
    from scheduler.store.port import HistoryPort, LeaseStorePort, WebhooksPort

    Part = Literal[
        "store",
        "providers",
        "limits",
        "metrics",
        "idempotency",
        "read_check",
        "readiness",
        "handoff",
        "callers",
        "identity",
        "history",
        "webhooks",
        "bus",
        "deliveries",
    ]

# An API route must answer before API Gateway gives up on it (HTTP API: 30 s, whatever the function's
# timeout). The reserve covers what follows the provider calls (recording the outcome, answering)
# and the cold start, which API Gateway's clock counts and the function's does not.
API_GATEWAY_TIMEOUT_SECONDS = 30.0
REQUEST_RESERVE_SECONDS = 5.0
# Scheduled and stream functions keep this much of their timeout to record what they did.
BACKGROUND_RESERVE_SECONDS = 10.0

_PARTS = (
    "store",
    "providers",
    "limits",
    "metrics",
    "idempotency",
    "read_check",
    "readiness",
    "handoff",
    "callers",
    "identity",
    "history",
    "webhooks",
    "bus",
    "deliveries",
)


def request_deadline(context: Any) -> Deadline:
    """Until when an API request's provider calls may run."""
    return Deadline.of_invocation(
        context, reserve_seconds=REQUEST_RESERVE_SECONDS, at_most_seconds=API_GATEWAY_TIMEOUT_SECONDS
    )


def background_deadline(context: Any) -> Deadline:
    """Until when a scheduled or stream invocation's provider calls may run."""
    return Deadline.of_invocation(context, reserve_seconds=BACKGROUND_RESERVE_SECONDS)


class Runtime:
    """The settings and what is built from them: the lease store, the providers, limits, metrics, clock.

    Each part is built from the settings when first used, unless given here.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock = utc_now,
        store: LeaseStorePort | None = None,
        providers: ConfiguredProviders | None = None,
        limits: LeaseLimits | None = None,
        metrics: Metrics | None = None,
        idempotency: IdempotentAcquire | None = None,
        read_check: ReadCheck | None = None,
        readiness: ReadinessPolicy | None = None,
        handoff: Handoff | None = None,
        callers: CallerStore | None = None,
        identity: Identity | None = None,
        history: HistoryPort | None = None,
        webhooks: WebhooksPort | None = None,
        bus: Bus | None = None,
        deliveries: DeliveryQueue | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        # A part given here takes the place of the one its property would build (each a cached_property).
        if store is not None:
            self.store = store
        if providers is not None:
            self.providers = providers
        if limits is not None:
            self.limits = limits
        if metrics is not None:
            self.metrics = metrics
        if idempotency is not None:
            self.idempotency = idempotency
        if read_check is not None:
            self.read_check = read_check
        if readiness is not None:
            self.readiness = readiness
        if handoff is not None:
            self.handoff = handoff
        if callers is not None:
            self.callers = callers
        if identity is not None:
            self.identity = identity
        if history is not None:
            self.history = history
        if webhooks is not None:
            self.webhooks = webhooks
        if bus is not None:
            self.bus = bus
        if deliveries is not None:
            self.deliveries = deliveries

    @classmethod
    def from_environment(cls) -> Runtime:
        """The runtime of this execution environment, from its variables."""
        return cls(get_settings())

    def warm(self, *parts: Part, drivers: bool = False) -> Runtime:
        """Build `parts` now (at init, which Lambda runs before the first request arrives), and with `drivers` every
        configured provider's driver (its SDK imported).

        What is built here lives as long as the execution environment and is no garbage: the cyclic collector is
        paused while it is built, and then all of init's objects are frozen. Its passes while botocore made a
        client were 20-35 ms of a 215-300 ms init (bench/README.md, "GC passes"); after a freeze no later pass
        walks them again.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            for name in parts:
                if name not in _PARTS:
                    raise TypeError(f"unknown runtime part {name!r}")
                getattr(self, name)
            if drivers:
                self.providers.warm()
        finally:
            if collecting:
                gc.enable()
            gc.freeze()
        return self

    def context(self, deadline: Deadline | None, caller: Caller) -> Context:
        """What the use cases work with in one invocation for `caller` (a request's, or the service's own), whose
        provider calls end by `deadline` (None: no limit)."""
        from scheduler.leases.context import Context

        return Context(self.store, self.providers, self.settings, self.limits, self.clock, or_never(deadline), caller)

    @cached_property
    def store(self) -> LeaseStorePort:
        """The lease store on the configured tables, with bounded timeouts and standard retries."""
        return lease_store(self.settings)

    @cached_property
    def providers(self) -> ConfiguredProviders:
        """The providers `PROVIDERS` names, each timed, counted and traced; drivers load on first use."""
        from scheduler.providers.configured import ConfiguredProviders

        def instrumented(driver: Provider) -> Provider:
            from scheduler.observability.instrumented import InstrumentedProvider

            return InstrumentedProvider(driver, self.metrics, tracing=self.settings.tracing)

        return ConfiguredProviders(self.settings, wrap=instrumented, store=lambda: self.store)

    @cached_property
    def limits(self) -> LeaseLimits:
        """The provider caps, the owner quota and the owner budgets the settings set."""
        from scheduler.limits import LeaseLimits

        return LeaseLimits.from_settings(self.settings)

    @cached_property
    def metrics(self) -> Metrics:
        """Where metrics go: EMF documents on stdout (the one channel every function emits through)."""
        from scheduler.observability.metrics import EmfMetrics

        return EmfMetrics(self.settings.powertools_metrics_namespace)

    @cached_property
    def idempotency(self) -> IdempotentAcquire:
        """Acquire behind powertools' Idempotency utility, on the idempotency table, sharing the store's client."""
        from scheduler.idempotency import IdempotentAcquire
        from scheduler.store import LeaseStore

        store = self.store
        if not isinstance(store, LeaseStore):
            raise TypeError("the idempotency table shares the DynamoDB lease store's client: give idempotency= too")
        return IdempotentAcquire(
            self.settings.idempotency_table,
            store.client,
            self.settings.idempotency_ttl_seconds,
            read=store.get,
            clock=self.clock,
        )

    @cached_property
    def read_check(self) -> ReadCheck:
        """The check GET /v1/lease/{id} runs on an active lease's worker (drivers load on first need)."""
        from scheduler.leases.liveness import ReadCheck

        return ReadCheck(interval_seconds=self.settings.worker_read_check_seconds)

    @cached_property
    def readiness(self) -> ReadinessPolicy:
        """How a starting worker is judged ready (READY_TIMEOUT_SECONDS, READY_PROBE_PATH)."""
        from scheduler.leases.readiness import ReadinessPolicy

        return ReadinessPolicy(
            timeout_seconds=self.settings.ready_timeout_seconds, probe_path=self.settings.ready_probe_path
        )

    @cached_property
    def callers(self) -> CallerStore:
        """The callers registry (CALLERS_TABLE), on the lease store's DynamoDB client."""
        from scheduler.store.callers import CallerStore
        from scheduler.store.retries import Backoff

        # The lease store's client when this runtime has one (a test's embedded DynamoDB); else its own, so that
        # the token authorizer loads no lease store at all.
        client = self.__dict__["store"].client if "store" in self.__dict__ else dynamodb_client()
        return CallerStore(
            self.settings.callers_table, client, retry=Backoff(budget_seconds=self.settings.store_retry_seconds)
        )

    @cached_property
    def identity(self) -> Identity:
        """Who is calling, as AUTH_MODE says (the registry is read only in iam mode, and only when first needed)."""
        from scheduler.api.identity import Identity

        return Identity(self.settings, lambda: self.callers)

    @cached_property
    def history(self) -> HistoryPort:
        """Each lease's history (LEASE_EVENTS_TABLE), on the lease store's DynamoDB client when there is one."""
        from scheduler.store.history import HistoryStore
        from scheduler.store.retries import Backoff

        return HistoryStore(
            self.settings.lease_events_table,
            self._dynamodb(),
            retention_seconds=self.settings.retention_seconds,
            retry=Backoff(budget_seconds=self.settings.store_retry_seconds),
        )

    @cached_property
    def webhooks(self) -> WebhooksPort:
        """The webhooks registry (WEBHOOKS_TABLE), on the lease store's DynamoDB client when there is one."""
        from scheduler.store.retries import Backoff
        from scheduler.store.webhooks import WebhookStore

        return WebhookStore(
            self.settings.webhooks_table,
            self._dynamodb(),
            retry=Backoff(budget_seconds=self.settings.store_retry_seconds),
        )

    @cached_property
    def bus(self) -> Bus:
        """The stack's EventBridge bus (EVENT_BUS_NAME)."""
        from scheduler.events.channels import EventBridgeBus

        return EventBridgeBus(aws_client("events"), self.settings.event_bus_name)

    @cached_property
    def deliveries(self) -> DeliveryQueue:
        """The webhook delivery queue and its dead-letter queue (WEBHOOK_QUEUE_URL, WEBHOOK_DEAD_LETTER_QUEUE_URL)."""
        from scheduler.events.channels import SqsDeliveryQueue

        return SqsDeliveryQueue(
            lambda: aws_client("sqs"), self.settings.webhook_queue_url, self.settings.webhook_dead_letter_queue_url
        )

    def _dynamodb(self) -> Any:
        """The lease store's client when this runtime has one (a test's embedded DynamoDB), else one of its own,
        made once for the history and the webhooks registry both (a client costs milliseconds of a cold start)."""
        store = self.__dict__.get("store")
        if store is not None and hasattr(store, "client"):
            return store.client
        if "_own_dynamodb" not in self.__dict__:
            self.__dict__["_own_dynamodb"] = dynamodb_client()
        return self.__dict__["_own_dynamodb"]

    @cached_property
    def handoff(self) -> Handoff:
        """Where a scheduled run hands on what it could not finish: its own function, invoked asynchronously."""
        from scheduler.handoff import LambdaHandoff

        return LambdaHandoff()


def lease_store(settings: Settings, client: Any = None) -> LeaseStore:
    """A LeaseStore as the settings configure it, on `client` (default: a DynamoDB client with bounded
    timeouts and standard retries)."""
    from scheduler.store import LeaseStore
    from scheduler.store.retries import Backoff

    if client is None:
        client = dynamodb_client()
    return LeaseStore(
        settings.leases_table,
        client,
        shards=settings.live_index_shards,
        retention_seconds=settings.retention_seconds,
        release_claim_seconds=settings.release_claim_seconds,
        counters_table=settings.counters_table,
        retry=Backoff(budget_seconds=settings.store_retry_seconds),
        usage_table=settings.usage_table,
    )


def dynamodb_client() -> Any:
    """A DynamoDB client with bounded timeouts and standard retries."""
    return aws_client("dynamodb")


def aws_client(service: str) -> Any:
    """A client of `service` (dynamodb, events, sqs) with bounded timeouts and standard retries."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 3})
    return boto3.client(service, config=config)  # type: ignore[call-overload]
