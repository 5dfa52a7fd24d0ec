"""The `modal` driver: one Modal Sandbox per lease, through Modal's own client.

This module (with `session.py` and `workers.py`) is the only code that speaks Modal's API. A worker is a
Sandbox of the App `MODAL_APP_NAME`, made from the kind's registry image with one GPU of the first type
of the lease's class that Modal schedules within its share of the caller's time, named `lease-<id>` and
tagged with the lease (so an orphan is recognised), its port behind an encrypted tunnel (the endpoint),
and a timeout a little past the lease's expiry, so that Modal itself ends a worker everything else forgot.
Modal cannot extend a running Sandbox's timeout: the worker reports when it ends (`ProvisionedWorker.ends_at`),
and the lease is never renewed past that.

How Modal's answers map onto the provider contract (`providers/base.py`):

| Modal says                                         | the driver                                          |
| -------------------------------------------------- | --------------------------------------------------- |
| not scheduled in time (a GPU type out of capacity) | removes what it made, tries the next GPU type       |
| RESOURCE_EXHAUSTED (the workspace's quota)         | removes what it made; the next provider (capacity)  |
| UNAUTHENTICATED, a failed image build, INVALID     | ProviderRequestFailed (502), nothing left behind    |
| unreachable, UNAVAILABLE, no answer in time        | looks the Sandbox up by the lease's tag: adopts a   |
|                                                    | running one, removes any other; WorkerOutcomeUnknown|
|                                                    | when even the lookup fails (the reconciler removes) |
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from scheduler.costs import money
from scheduler.deadline import Deadline, or_never
from scheduler.errors import ConfigurationError
from scheduler.models import GpuClass, Lease, WorkerKind, format_time
from scheduler.observability.log import Logger
from scheduler.providers.base import (
    ManagedWorker,
    PriceAboveCeiling,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    Readiness,
    WorkerGone,
    WorkerOutcomeUnknown,
    above_ceiling,
    worker_name,
)
from scheduler.providers.modal import NAME, ModalSettings, price_table
from scheduler.providers.modal.session import Credentials, ModalSession, ModalTimeout
from scheduler.providers.modal.workers import (
    MANAGED,
    TAG_CREATED,
    TAG_KIND,
    TAG_LEASE,
    TAG_MANAGED,
    Found,
    create_sandbox,
    failure,
    find_tagged,
    list_managed,
    read_logs,
    readiness,
    readiness_many,
    terminate_and_confirm,
)
from scheduler.worker_logs import LogLine, LogQuery

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.request_models import LeaseRequest

logger = Logger(child=True)

# A Sandbox lives this much past its lease's expiry (its timeout, fixed when it is made), at most Modal's 24 h.
TIMEOUT_MARGIN_SECONDS = 300
MAX_SANDBOX_SECONDS = 24 * 3600
# Modal's published multipliers for a Sandbox pinned to regions: broad (`us`), narrow (`us-east`).
BROAD_REGION_MULTIPLIER, NARROW_REGION_MULTIPLIER = 1.5, 1.75


def from_settings(settings: ModalSettings) -> ModalProvider:
    """The driver, active only when a token is configured (env locally, Secrets Manager in AWS)."""
    credentials: Callable[[], Credentials | None]
    if settings.modal_token_id and settings.modal_token_secret is not None:
        pair = (settings.modal_token_id, settings.modal_token_secret.get_secret_value())
        credentials = lambda: pair  # noqa: E731
    elif settings.modal_token_secret_arn:
        credentials = _secret_reader(settings.modal_token_secret_arn)
    else:
        credentials = lambda: None  # noqa: E731
    configured = bool(settings.modal_token_id and settings.modal_token_secret) or bool(settings.modal_token_secret_arn)
    return ModalProvider(
        ModalSession(settings.modal_server_url, credentials, settings.modal_app_name, configured=configured),
        images={WorkerKind.RENDERER: settings.modal_renderer_image, WorkerKind.ANIM: settings.modal_anim_image},
        gpu_types={
            GpuClass.ENTRY: settings.modal_gpu_types_entry,
            GpuClass.MID: settings.modal_gpu_types_mid,
            GpuClass.HIGH: settings.modal_gpu_types_high,
        },
        prices=price_table(settings.modal_prices),
        port=settings.modal_worker_port,
        regions=dict(settings.modal_regions),
    )


def _secret_reader(secret_arn: str) -> Callable[[], Credentials | None]:
    def read() -> Credentials | None:
        from aws_lambda_powertools.utilities import parameters

        # Cached for five minutes: a rotated token takes effect without a redeploy.
        value = parameters.get_secret(secret_arn, transform="json", max_age=300)
        if not isinstance(value, dict) or not value.get("token_id") or not value.get("token_secret"):
            logger.warning("the Modal token secret holds no token_id and token_secret")
            return None
        return str(value["token_id"]), str(value["token_secret"])

    return read


class ModalProvider(Provider):
    """GPU Sandboxes on Modal, named `lease-<lease_id>` and tagged with it."""

    name = NAME

    def __init__(
        self,
        session: ModalSession,
        images: Mapping[WorkerKind, str | None],
        gpu_types: Mapping[GpuClass, tuple[str, ...]],
        prices: Mapping[str, float],
        port: int = 8080,
        regions: Mapping[str, tuple[str, ...]] | None = None,
        *,
        create_seconds: float = 20.0,
        call_seconds: float = 10.0,
        release_confirm_seconds: float = 10.0,
        settle_reserve_seconds: float = 3.0,
    ) -> None:
        self._session = session
        self._images = dict(images)
        self._gpu_types = dict(gpu_types)
        self._prices = {gpu.upper(): price for gpu, price in prices.items()}
        unpriced = sorted({gpu.upper() for listed in self._gpu_types.values() for gpu in listed} - set(self._prices))
        if unpriced:  # the settings refuse these first (`refuse_unpriced_gpu_types`); a driver built otherwise: here
            raise ConfigurationError(f"Modal GPU type(s) {', '.join(unpriced)} have no price in MODAL_PRICES")
        self._port = port
        self._regions = dict(regions or {})
        self._create_seconds = create_seconds
        self._call_seconds = call_seconds
        self._release_confirm_seconds = release_confirm_seconds
        self._settle_reserve = settle_reserve_seconds
        if not session.configured:
            logger.warning("modal is in PROVIDERS but no Modal token is configured; it will serve nothing")

    # --- what it can serve, and at what price ---------------------------------------------------------

    def available(self, request: LeaseRequest) -> bool:
        """GPU leases of a kind with an image, a class with GPU types, a region it knows (if it has regions)."""
        placeable = request.region is None or not self._regions or request.region in self._regions
        return (
            placeable
            and bool(self._images.get(request.kind))
            and bool(self._gpu_types.get(request.gpu))
            and self._session.configured
        )

    def regions(self) -> tuple[str, ...] | None:
        """MODAL_REGIONS' names (None when none are configured: a request's region is not used)."""
        return tuple(self._regions) or None

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        """The dearest GPU type of the class within the ceiling, at the request's region's multiplier."""
        multiplier = self._multiplier(request.region)
        listed = [self._price(gpu, multiplier) for gpu in self._gpu_types.get(request.gpu, ())]
        ceiling = request.max_cost_per_hour
        fitting = [price for price in listed if ceiling is None or price <= ceiling]
        return max(fitting) if fitting else ceiling

    def _price(self, gpu: str, multiplier: float) -> float:
        """A configured GPU type's price (every one has a price: `__init__` refuses any other)."""
        return round(self._prices[gpu.upper()] * multiplier, 6)

    def _adoptable_price(self, gpu: str | None, multiplier: float) -> float | None:
        """The price of a found Sandbox's GPU type (its tag), None when it has none or no price (not adopted)."""
        return self._price(gpu, multiplier) if gpu is not None and gpu.upper() in self._prices else None

    def _multiplier(self, region: str | None) -> float:
        modal_regions = self._regions.get(region or "", ())
        if not modal_regions:
            return 1.0
        return min(NARROW_REGION_MULTIPLIER if "-" in name else BROAD_REGION_MULTIPLIER for name in modal_regions)

    # --- provision ------------------------------------------------------------------------------------

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        """The first GPU type of the class, within the ceiling, that Modal schedules in its share of the time."""
        until = min(time.monotonic() + self._create_seconds, or_never(deadline).at)
        try:
            self._session.app(self._left(until))
        except Exception as error:
            raise _unreachable_or_refused(error, "Modal could not look up the App") from error
        multiplier = self._multiplier(lease.region)
        gpus = list(self._gpu_types.get(lease.gpu, ()))
        refusals: list[str] = []
        seen: list[float] = []
        for index, gpu in enumerate(gpus):
            price = self._price(gpu, multiplier)
            seen.append(price)
            if above_ceiling(price, lease):
                refusals.append(f"{gpu}: {money(price)} USD/h at Modal's prices, above max_cost_per_hour")
                continue
            share = (self._left(until) - self._settle_reserve) / (len(gpus) - index)
            if share < 0.5:
                refusals.append(f"{gpu}: no time left to try it")
                break
            outcome = self._create(lease, env, gpu, price, share, until)
            if isinstance(outcome, ProvisionedWorker):
                return outcome
            refusals.append(f"{gpu}: {outcome}")
        message = f"Modal could not start any GPU type for {lease.gpu}: {' | '.join(refusals) or 'none configured'}"
        if lease.max_cost_per_hour is not None and any("above max_cost_per_hour" in why for why in refusals):
            raise PriceAboveCeiling(message, min(seen) if seen else None)
        raise ProviderCapacityError(message)

    def _create(
        self, lease: Lease, env: Mapping[str, str], gpu: str, price: float, share: float, until: float
    ) -> ProvisionedWorker | str:
        """The worker, or why this GPU type was passed over; raises when no GPU type can help."""
        spec = {
            "image": self._images[lease.kind],
            "gpu": gpu,
            "name": worker_name(lease.lease_id),
            "env": {**env, "LEASE_ID": lease.lease_id, "LEASE_EXPIRES_AT": format_time(lease.expires_at)},
            "tags": _tags(lease),
            "timeout": self._timeout(lease),
            "port": self._port,
            "regions": self._regions.get(lease.region or "", ()),
        }
        try:
            token, endpoint = self._session.run(
                lambda client: create_sandbox(client, self._session, spec), share, f"a {gpu} Sandbox"
            )
        except ModalTimeout:
            # Modal queues a Sandbox until a GPU of its type is free: not scheduled (or its tunnel not up) in time.
            adopted = self._settle(lease, until, adopt=True)  # it may have come up, or the create never answered
            return adopted or f"not started within {share:.0f} s (no capacity, or a slow start)"
        except Exception as error:
            kind = failure(error)
            if kind == "capacity":
                return f"no capacity ({error})"
            if kind == "exists":  # an earlier attempt for this lease made it: that one is the worker
                adopted = self._settle(lease, until, adopt=True)
                return adopted if adopted is not None else f"a Sandbox of this lease existed ({error})"
            if kind == "refused":
                raise ProviderRequestFailed(f"Modal refused the Sandbox: {error}") from error
            if kind == "quota":
                self._settle(lease, until, adopt=False)
                raise ProviderCapacityError(f"Modal's quota: {error}") from error
            adopted = self._settle(lease, until, adopt=True)  # the create may have happened
            if adopted is not None:
                return adopted
            raise ProviderUnreachable(f"Modal did not create the Sandbox: {error}") from error
        return ProvisionedWorker(token, endpoint, cost_per_hour=price, ready=False, ends_at=self.sandbox_end(lease))

    def _settle(self, lease: Lease, until: float, *, adopt: bool) -> ProvisionedWorker | None:
        """After a create that did not answer: adopt the lease's running Sandbox (with its tunnel), remove any
        other; WorkerOutcomeUnknown when that cannot be done in time (the lease stays pending)."""
        seconds = max(self._left(until), 1.0)
        try:
            found: list[Found] = self._session.run(
                lambda client: find_tagged(client, self._session, lease.lease_id, self._port),
                seconds,
                "the lookup of the lease's Sandboxes",
            )
            for sandbox in found:
                price = self._adoptable_price(sandbox.gpu, self._multiplier(lease.region))
                if adopt and sandbox.endpoint is not None and price is not None:
                    logger.warning(
                        "the create did not answer but its Sandbox runs; adopting it", extra={"sandbox": sandbox.token}
                    )
                    return ProvisionedWorker(
                        sandbox.token, sandbox.endpoint, price, ready=False, ends_at=self.sandbox_end(lease)
                    )
            for sandbox in found:
                self._terminate(sandbox.token, max(self._left(until), 1.0))
        except (ProviderRequestFailed, ProviderUnreachable) as error:
            raise WorkerOutcomeUnknown(f"a Modal Sandbox of lease {lease.lease_id} may exist: {error}") from error
        except Exception as error:
            raise WorkerOutcomeUnknown(f"a Modal Sandbox of lease {lease.lease_id} may exist: {error}") from error
        return None

    def _timeout(self, lease: Lease) -> int:
        left = (lease.expires_at - datetime.now(UTC)).total_seconds()
        return int(min(MAX_SANDBOX_SECONDS, max(60.0, math.ceil(left)) + TIMEOUT_MARGIN_SECONDS))

    @staticmethod
    def sandbox_end(lease: Lease) -> datetime:
        """The earliest a Sandbox made for `lease` (by any attempt of its acquire) can be ended by its timeout.

        Modal counts the timeout from the create or later, and `_timeout` asked at `t` (never before the lease
        was made) gives min(24 h, the time left + the margin): so the Sandbox ends no sooner than
        min(t + 24 h, expiry + margin), however long the create took. The lease's expiry cannot move before
        the worker is recorded (a pending lease is not renewed), and Modal cannot extend a running Sandbox:
        the lease is never renewed past this."""
        return min(
            lease.created_at + timedelta(seconds=MAX_SANDBOX_SECONDS),
            lease.expires_at + timedelta(seconds=TIMEOUT_MARGIN_SECONDS),
        )

    @staticmethod
    def _left(until: float) -> float:
        return until - time.monotonic()

    # --- release, listing, readiness, logs ------------------------------------------------------------

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        """Terminate the Sandbox (every Sandbox tagged with the lease when no token) and confirm it finished."""
        budget = or_never(deadline).bound(self._call_seconds + self._release_confirm_seconds)
        until = time.monotonic() + budget
        tokens = [token] if token else [found.token for found in self._tagged(lease_id, budget)]
        for sandbox_id in tokens:
            self._terminate(sandbox_id, max(self._left(until), 0.05))

    def _terminate(self, sandbox_id: str, seconds: float) -> None:
        try:
            still = self._session.run(
                lambda client: terminate_and_confirm(client, sandbox_id, self._release_confirm_seconds),
                seconds,
                f"the termination of Sandbox {sandbox_id}",
            )
        except Exception as error:
            raise _call_failed(error, f"Modal would not terminate Sandbox {sandbox_id}") from error
        if still:
            raise ProviderRequestFailed(f"the Modal Sandbox {sandbox_id} is still running after its termination")

    def _tagged(self, lease_id: str, seconds: float) -> list[Found]:
        try:
            found: list[Found] = self._session.run(
                lambda client: find_tagged(client, self._session, lease_id, None),
                seconds,
                "the lookup of the lease's Sandboxes",
            )
        except Exception as error:
            raise _call_failed(error, "Modal would not list the lease's Sandboxes") from error
        return found

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every running Sandbox of the App tagged as ours (a finished Sandbox costs nothing)."""
        if not self._session.configured:
            return []
        try:
            workers: list[ManagedWorker] = self._session.run(
                lambda client: list_managed(client, self._session),
                or_never(deadline).bound(self._call_seconds),
                "the listing of Sandboxes",
            )
        except Exception as error:
            raise _call_failed(error, "Modal would not list the Sandboxes") from error
        return workers

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        """Ready once the Sandbox runs and its port's tunnel is up; failed once it has finished (or is gone)."""
        try:
            said: Readiness = self._session.run(
                lambda client: readiness(client, token, self._port),
                or_never(deadline).bound(self._call_seconds),
                f"the state of Sandbox {token}",
            )
        except Exception as error:
            raise _call_failed(error, f"Modal would not show Sandbox {token}") from error
        return said

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        """Every booting Sandbox's state, asked at once (the sweep's pass)."""
        if not workers or not self._session.configured:
            return {}
        try:
            said: dict[str, Readiness] = self._session.run(
                lambda client: readiness_many(client, list(workers), self._port),
                or_never(deadline).bound(self._call_seconds),
                "the state of the booting Sandboxes",
            )
        except Exception as error:
            raise _call_failed(error, "Modal would not show the booting Sandboxes") from error
        return said

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        """The Sandbox's stdout, stderr and Modal's own lines (`system`); WorkerGone once it has finished."""
        budget = or_never(deadline).bound(self._call_seconds)
        sandbox_id = token
        if sandbox_id is None:
            found = self._tagged(lease_id, budget)
            if not found:
                raise WorkerGone(f"Modal holds no running Sandbox of lease {lease_id}")
            sandbox_id = found[0].token
        try:
            lines: list[LogLine] = self._session.run(
                lambda client: read_logs(client, sandbox_id, query), budget, f"the logs of Sandbox {sandbox_id}"
            )
        except WorkerGone:
            raise
        except Exception as error:
            raise _call_failed(error, f"Modal would not serve the logs of Sandbox {sandbox_id}") from error
        return lines


def _tags(lease: Lease) -> dict[str, str]:
    return {
        TAG_MANAGED: MANAGED,
        TAG_LEASE: lease.lease_id,
        TAG_KIND: lease.kind.value,
        TAG_CREATED: str(int(lease.created_at.timestamp())),
    }


def _call_failed(error: Exception, what: str) -> Exception:
    """A failure of any call but provision: unreachable or timed out, else a failed request."""
    if isinstance(error, ProviderUnreachable | ProviderRequestFailed):
        return error
    if failure(error) == "unreachable":
        return ProviderUnreachable(f"{what}: {error}")
    return ProviderRequestFailed(f"{what}: {error}")


def _unreachable_or_refused(error: Exception, what: str) -> Exception:
    """Before anything was made: unreachable (capacity, try the next provider) or refused (502)."""
    if isinstance(error, ProviderUnreachable | ProviderRequestFailed):
        return error
    if failure(error) == "refused":
        return ProviderRequestFailed(f"{what}: {error}")
    return ProviderUnreachable(f"{what}: {error}")
