"""Configuration: every variable the functions read, parsed once from the environment into typed values.

Each field's variable is its UPPER_CASE name, and each says where it comes from:

- `parameter="X"`: template.yaml sets it from parameter X (whose UPPER_SNAKE name is the variable, so
  `make run` overrides it with the same variable);
- `template=True`: template.yaml sets it to a constant or to a resource it creates (a table name);
- `local="..."`: never set in AWS; it exists for `make run` and tests, for the reason given.

The settings of each provider live with the provider (`providers/<name>`, a `ProviderSettings`), are
declared the same way and are parsed here, with the rest, for every provider `PROVIDERS` names; a
provider's cap `<NAME>_MAX_LEASES` is derived from its name. `tests/unit/test_configuration.py` fails
when a field, template.yaml and the README's configuration table disagree.

A plain dataclass rather than a pydantic model: building a pydantic model costs ~15 ms of cold start
and every function reads its settings at init; the checks here are the few that matter.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self, TypeVar

from scheduler.callers.model import is_principal_arn
from scheduler.errors import ConfigurationError
from scheduler.providers.registry import PROVIDERS, provider_package

if TYPE_CHECKING:
    from scheduler.owner_policies import OwnerPolicies

_S = TypeVar("_S", bound="SettingsSection")


class Secret:
    """A string that never shows itself: `repr`, `str`, `format` (f-strings, `%s`) and so every log line,
    JSON-rendered ones included, show a mask. Not a `str`, so no string operation hands the value on either:
    only `get_secret_value()` does."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        """The secret itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:  # settings compare by value
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class Source(NamedTuple):
    """Where a variable's value comes from in a deployed stack."""

    parameter: str | None = None  # set from this template parameter
    template: bool = False  # set by the template to a constant or a resource
    local: str | None = None  # not set in AWS: why it exists

    @property
    def label(self) -> str:
        if self.parameter:
            return f"parameter {self.parameter}"
        return "template" if self.template else "local only"


def setting(
    default: Any,
    *,
    parameter: str | None = None,
    template: bool = False,
    local: str | None = None,
    parse: Callable[[str], Any] | None = None,
    low: int | None = None,
    high: int | None = None,
) -> Any:
    """A settings field: its default, where a deployed stack sets it, and how its text is parsed."""
    if sum((parameter is not None, template, local is not None)) != 1:
        raise ValueError("a setting comes from exactly one place: a parameter, the template, or local only")
    metadata = {"source": Source(parameter, template, local), "parse": parse, "low": low, "high": high}
    return field(default=default, metadata=metadata)


def names(raw: str) -> tuple[str, ...]:
    """A comma list (blank entries dropped)."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def one_of(*allowed: str) -> Callable[[str], str]:
    """Exactly one of `allowed`."""

    def parse(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return raw

    return parse


class SettingsSection:
    """Typed settings parsed from an environment; a field's variable is its UPPER_CASE name.

    Subclasses are declared `@dataclass(init=False, repr=False, eq=False)`: their methods (init, equality,
    repr, hash, and the refusal to change a field) are these, compiled once into the layer's bytecode,
    where a plain frozen dataclass would compile its own, sized by its fields, at every cold start.
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]  # each subclass's, set by @dataclass

    def __init__(self, **values: Any) -> None:
        specs = fields(self)
        unknown = set(values) - {spec.name for spec in specs}
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(sorted(unknown))}")
        for spec in specs:
            if spec.name in values:
                value = values[spec.name]
            elif spec.default_factory is not MISSING:
                value = spec.default_factory()
            else:
                value = spec.default
            object.__setattr__(self, spec.name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, spec.name) for spec in fields(self))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: settings are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: settings are immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, SettingsSection)  # noqa: S101 - narrowing for mypy  # nosec B101
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(tuple(value for value in self._values() if not isinstance(value, Mapping)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{spec.name}={getattr(self, spec.name)!r}" for spec in fields(self) if spec.repr)
        return f"{type(self).__name__}({shown})"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """Parse the fields' variables; a bad value names the variable."""
        return cls(**cls.parse_values(environ))

    @classmethod
    def parse_values(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for spec in fields(cls):
            if "source" not in spec.metadata:
                continue
            raw = environ.get(spec.name.upper(), "").strip()
            if raw == "":
                continue
            try:
                values[spec.name] = _parse(spec.metadata, spec.type, raw)
            except ValueError as error:
                raise ConfigurationError(f"invalid configuration: {spec.name.upper()}={raw!r}: {error}") from error
        return values

    @classmethod
    def variables(cls) -> dict[str, tuple[Source, Any]]:
        """Each variable with where it comes from and its default (for docs and the consistency test)."""
        return {
            spec.name.upper(): (spec.metadata["source"], None if spec.default is MISSING else spec.default)
            for spec in fields(cls)
            if "source" in spec.metadata
        }


def whole_number(raw: str) -> int:
    """A whole number in ASCII digits, such as 5 or -1 (`int()` alone also takes `٣`, `１`, `1_000` and `+5`)."""
    digits = raw.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError("must be a whole number in the digits 0-9, such as 5")
    return int(raw)


def _parse(metadata: Mapping[str, Any], annotation: object, raw: str) -> object:
    parser = metadata["parse"]
    if parser is None and str(annotation).startswith("int"):  # `int` and `int | None` fields
        parser = whole_number
    value = parser(raw) if parser is not None else raw
    low, high = metadata["low"], metadata["high"]
    if isinstance(value, int) and ((low is not None and value < low) or (high is not None and value > high)):
        raise ValueError(f"must be between {low} and {high}" if high is not None else f"must be at least {low}")
    return value


def provider_settings(name: str) -> type[SettingsSection]:
    """The settings class of a known provider (`SETTINGS` in its package)."""
    settings: type[SettingsSection] = provider_package(name).SETTINGS
    return settings


def cap_variable(provider: str) -> str:
    """The variable that caps a provider's live leases: `local-docker` → LOCAL_DOCKER_MAX_LEASES."""
    return provider.upper().replace("-", "_") + "_MAX_LEASES"


def cap_parameter(provider: str) -> str:
    """The template parameter behind it: `local-docker` → LocalDockerMaxLeases."""
    return "".join(part.capitalize() for part in provider.split("-")) + "MaxLeases"


def ascii_number(raw: str, what: str, example: str) -> float:
    """A number in the digits 0-9 (`float()` alone also takes `١٢.٥`, `１２` and `1_2.5`): `what`, such as `example`."""
    if not raw.isascii() or "_" in raw:
        raise ValueError(f"must be {what} in the digits 0-9, such as {example}")
    try:
        return float(raw)
    except ValueError as error:
        raise ValueError(f"must be {what}, such as {example}") from error


def dollars(raw: str) -> float:
    """A positive amount of US dollars, such as 12.5."""
    value = ascii_number(raw, "an amount of US dollars", "12.5")
    if not value > 0 or value == float("inf"):
        raise ValueError("must be an amount of US dollars above 0, such as 12.5")
    return value


def budget(raw: str) -> float:
    """A budget in US dollars: above 0 and a whole number of micro-dollars, which is what the budget
    counters count, so that the limit enforced is the one written (never silently rounded)."""
    value = dollars(raw)
    try:
        whole = (Decimal(raw) * 1_000_000) % 1 == 0
    except InvalidOperation:
        whole = False
    if not whole:
        raise ValueError(
            "must be a whole number of micro-dollars: at least 0.000001 USD, with at most 6 decimal places"
        )
    return value


def interval(raw: str) -> float:
    """A period in seconds above 0 and at most a day, such as 60 or 0.5 (the daily budget reserves it past
    each lease's expiry, on each day the lease may then end on, all in the acquire's one transaction)."""
    value = ascii_number(raw, "a number of seconds", "60")
    if not value > 0 or not math.isfinite(value):
        raise ValueError("must be a number of seconds above 0, such as 60")
    if value > 86_400:
        raise ValueError("must be at most 86400 seconds (a day)")
    return value


def rate(raw: str) -> float:
    """A price per hour in US dollars, 0 or more."""
    if raw in ("0", "0.0"):
        return 0.0
    return dollars(raw)


def _api_version(raw: str) -> str | None:
    if raw.lower() == "auto":
        return None
    parts = raw.split(".")
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError("must be an Engine API version such as 1.44 (empty or auto: negotiate with the engine)")
    return raw


def flag(raw: str) -> bool:
    """A switch: 1, true or yes; 0, false or no."""
    word = raw.lower()
    if word in ("1", "true", "yes"):
        return True
    if word in ("0", "false", "no"):
        return False
    raise ValueError("must be 1, true or yes (on), or 0, false or no (off)")


def _probe_path(raw: str) -> str:
    if not raw.startswith("/") or not raw.isascii() or not raw.isprintable():
        raise ValueError("must be a URL path starting with / (printable ASCII), e.g. /healthz")
    return raw


API_VERSION = _api_version  # for providers whose settings take an Engine API version


def principal_arns(raw: str) -> tuple[str, ...]:
    """A comma list of IAM user or role ARNs (`arn:aws:iam::123456789012:role/ops`): an assumed-role session is
    matched by its role, so a session ARN (which ends with one session's name) names no operator."""
    found = names(raw)
    bad = [arn for arn in found if not is_principal_arn(arn)]
    if bad:
        raise ValueError(f"each entry must be an IAM user or role ARN (arn:aws:iam::<account>:role/<name>): {bad[0]}")
    return found


def _owner_policies(raw: str) -> OwnerPolicies:
    """OWNER_POLICIES (its module loads only where the variable is set, or the queue is used)."""
    from scheduler.owner_policies import OwnerPolicies

    return OwnerPolicies.parse(raw)


@dataclass(init=False, repr=False, eq=False)  # methods: SettingsSection's
class Settings(SettingsSection):
    """Everything the functions read from their environment."""

    providers: tuple[str, ...] = setting(("local-docker",), parameter="Providers", parse=names)
    leases_table: str = setting("openalice-scheduler-leases", template=True)
    counters_table: str = setting("openalice-scheduler-counters", template=True)
    idempotency_table: str = setting("openalice-scheduler-idempotency", template=True)
    idempotency_ttl_seconds: int = setting(24 * 3600, parameter="IdempotencyTtlSeconds", low=60)
    internal_secret: Secret | None = setting(
        None, local="the shared secret itself (AWS: INTERNAL_SECRET_ARN)", parse=Secret
    )
    internal_secret_arn: str | None = setting(None, template=True)
    # Who is calling (`scheduler/callers`): `secret`, owners self-asserted by the request (the shared secret);
    # `token`, a caller's own bearer token; `iam`, its SigV4-signed IAM principal.
    auth_mode: str = setting("secret", parameter="AuthMode", parse=one_of("secret", "token", "iam"))
    # How long an authorization is remembered (API Gateway's authorizer cache in token mode, each function's
    # principal lookup in iam mode): a revoked caller is refused within it.
    auth_cache_seconds: int = setting(60, parameter="AuthCacheSeconds", low=0, high=300)
    operator_principals: tuple[str, ...] = setting((), parameter="OperatorPrincipals", parse=principal_arns)
    callers_table: str = setting("openalice-scheduler-callers", template=True)
    # The bootstrap operator `admin` (token mode): whoever presents this token, read by the authorizer.
    bootstrap_token: Secret | None = setting(
        None, local="the bootstrap operator's token itself (AWS: BOOTSTRAP_TOKEN_SECRET_ARN)", parse=Secret
    )
    bootstrap_token_secret_arn: str | None = setting(None, template=True)
    worker_read_check_seconds: int = setting(5, parameter="WorkerReadCheckSeconds", low=0)
    ready_timeout_seconds: int = setting(600, parameter="ReadyTimeoutSeconds", low=10)
    ready_probe_path: str | None = setting(None, parameter="ReadyProbePath", parse=_probe_path)
    orphan_grace_seconds: int = setting(600, parameter="OrphanGraceSeconds", low=0)
    pending_deadline_seconds: int = setting(120, parameter="PendingDeadlineSeconds", low=1)
    release_claim_seconds: int = setting(120, parameter="ReleaseClaimSeconds", low=1)
    retention_seconds: int = setting(7 * 24 * 3600, parameter="RetentionSeconds", low=60)
    live_index_shards: int = setting(1, parameter="LiveIndexShards", low=1, high=64)
    # How long one store call keeps retrying DynamoDB's contention answers (conflicts, throttling).
    store_retry_seconds: int = setting(5, parameter="StoreRetrySeconds", low=0, high=25)
    # The sweep: leases released at once, and at most per run (the rest is handed on to another run).
    sweep_concurrency: int = setting(32, parameter="SweepConcurrency", low=1, high=64)
    sweep_batch_size: int = setting(1000, parameter="SweepBatchSize", low=1, high=10000)
    max_leases_per_owner: int | None = setting(None, parameter="MaxLeasesPerOwner", low=0)
    # Owner budgets in USD (unset: unlimited), taken in the lease's own transaction (`scheduler/budgets.py`).
    max_cost_per_hour_per_owner: float | None = setting(None, parameter="MaxCostPerHourPerOwner", parse=budget)
    max_spend_per_owner_per_day: float | None = setting(None, parameter="MaxSpendPerOwnerPerDay", parse=budget)
    # How long past its expires_at a lease may still bill, which the daily budget reserves with it: up to one
    # sweep period until the sweep claims it, plus the allowance for the sweep to reach it and release it.
    # The sweep's period is its schedule's, rate(1 minute), in AWS (a test keeps the two equal); `make run`
    # gives the functions its own SWEEP_INTERVAL_SECONDS.
    sweep_interval_seconds: float = setting(60, template=True, parse=interval)
    release_allowance_seconds: int = setting(30, parameter="ReleaseAllowanceSeconds", low=0, high=3600)
    # The queue (README, Queue): each owner's weight and highest priority (JSON; unset: weight 1, priority up to
    # 100 for all), how long a lease runs before it may be preempted, and the notice a preempted lease gets.
    owner_policies: OwnerPolicies | None = setting(None, parameter="OwnerPolicies", parse=_owner_policies)
    min_runtime_seconds: int = setting(300, parameter="MinRuntimeSeconds", low=0, high=86_400)
    preemption_notice_seconds: int = setting(120, parameter="PreemptionNoticeSeconds", low=0, high=86_400)
    usage_table: str = setting("openalice-scheduler-usage", template=True)
    # Lifecycle events (`scheduler/events`): each lease's history, the stack's bus, the owners' webhooks.
    lease_events_table: str = setting("openalice-scheduler-lease-events", template=True)
    event_bus_name: str | None = setting(None, template=True)
    # lease.expiring comes this many seconds (up to one sweep period more) before an active lease expires; 0: never.
    expiry_warning_seconds: int = setting(300, parameter="ExpiryWarningSeconds", low=0, high=86400)
    webhooks_table: str = setting("openalice-scheduler-webhooks", template=True)
    webhook_queue_url: str | None = setting(None, template=True)
    webhook_dead_letter_queue_url: str | None = setting(None, template=True)
    # How long a delivery is retried (with backoff) before it is kept in the dead-letter queue.
    webhook_retry_seconds: int = setting(86400, parameter="WebhookRetrySeconds", low=0, high=1209600)
    webhook_allow_loopback: bool = setting(
        False, local="make run's local receivers: webhooks to loopback addresses, over http too", parse=flag
    )
    log_level: str = setting("INFO", parameter="LogLevel", parse=one_of("DEBUG", "INFO", "WARNING", "ERROR"))
    powertools_metrics_namespace: str = setting("OpenAliceScheduler", template=True)
    aws_lambda_exec_wrapper: str | None = setting(None, template=True)
    otel_exporter_otlp_endpoint: str | None = setting(
        None, local="an OpenTelemetry collector outside Lambda (the ADOT wrapper sets it in AWS)"
    )
    # Derived: `<NAME>_MAX_LEASES` of every known provider (template parameter `<Name>MaxLeases`).
    provider_caps: Mapping[str, int] = field(default_factory=dict)
    # Each configured provider's own settings (`providers/<name>`), by provider name.
    sections: Mapping[str, SettingsSection] = field(default_factory=dict, repr=False)

    CAP_LOW: ClassVar[int] = 0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """Parse the environment, each configured provider's section and every provider's cap."""
        values = cls.parse_values(environ)
        providers = values.get("providers", ("local-docker",))
        if len(set(providers)) != len(providers):
            raise ConfigurationError(f"invalid configuration: PROVIDERS names a provider twice: {providers}")
        caps: dict[str, int] = {}
        for name in PROVIDERS:
            raw = environ.get(cap_variable(name), "").strip()
            if raw:
                caps[name] = _cap(cap_variable(name), raw)
        sections = {name: provider_settings(name).from_environ(environ) for name in providers if name in PROVIDERS}
        return cls(**values, provider_caps=caps, sections=sections)

    def section(self, provider: str, kind: type[_S]) -> _S:
        """The settings of `provider` (its defaults when this value was built without them)."""
        found = self.sections.get(provider)
        return found if isinstance(found, kind) else kind()

    @property
    def policies(self) -> OwnerPolicies:
        """OWNER_POLICIES, or every owner's defaults when it is unset."""
        from scheduler.owner_policies import OwnerPolicies

        return self.owner_policies or OwnerPolicies()

    @property
    def tracing(self) -> bool:
        """True when the function runs under the ADOT wrapper (or OTel is otherwise configured)."""
        return bool(self.aws_lambda_exec_wrapper or self.otel_exporter_otlp_endpoint)


def _cap(variable: str, raw: str) -> int:
    try:
        value = whole_number(raw)
        if value < Settings.CAP_LOW:
            raise ValueError(f"must be at least {Settings.CAP_LOW}")
    except ValueError as error:
        raise ConfigurationError(f"invalid configuration: {variable}={raw!r}: {error}") from error
    return value


# Variables set in template.yaml that no code of ours reads: the libraries that do.
LIBRARY_VARIABLES = {
    "POWERTOOLS_SERVICE_NAME": "powertools Logger (the service name on every log line)",
    "POWERTOOLS_LOG_LEVEL": "powertools Logger",
    "OTEL_SERVICE_NAME": "the ADOT layer's OpenTelemetry SDK",
    "OTEL_PROPAGATORS": "the ADOT layer's OpenTelemetry SDK",
    "AWS_ENDPOINT_URL": "botocore (declared for `sam local` only; never set in AWS)",
}


@cache
def get_settings() -> Settings:
    """The process-wide settings, parsed on first use."""
    return Settings.from_environ(os.environ)
