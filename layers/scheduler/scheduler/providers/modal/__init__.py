"""The `modal` provider: one Modal Sandbox per lease, through Modal's own client (`modal`, gRPC).

This package's settings are read by every function (they are light); the driver (`driver.py` with
`session.py`, the only code that speaks Modal's API, and the only code that imports `modal`) loads when
first used, and only in a function whose PROVIDERS names modal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from scheduler.config import Secret, SettingsSection, names, rate, setting
from scheduler.errors import ConfigurationError

if TYPE_CHECKING:
    from scheduler.providers.base import Provider

NAME = "modal"

# Modal's published per-second GPU prices × 3600 (see README, "Modal GPU Sandboxes"): USD per hour.
DEFAULT_PRICES = (
    "B200=6.2496,H200=4.5396,H100=3.9492,RTX-PRO-6000=3.0312,A100-80GB=2.4984,A100-40GB=2.0988,"
    "L40S=1.9512,A10=1.1016,L4=0.7992,T4=0.5904"
)


def price_table(raw: str) -> dict[str, float]:
    """`H100=3.9492,L4=0.7992` → {"H100": 3.9492, "L4": 0.7992}: USD per hour per GPU type."""
    parsed: dict[str, float] = {}
    for part in names(raw):
        gpu, sep, amount = part.partition("=")
        gpu = gpu.strip().upper()
        if not sep or not gpu:
            raise ValueError("must read GPU=USD_PER_HOUR,... (e.g. H100=3.9492,L4=0.7992)")
        try:
            value = rate(amount.strip())  # the house rule for amounts: ASCII digits, no `_`, finite
        except ValueError as error:
            raise ValueError(f"prices {gpu} at {amount.strip()!r}: {error}") from error
        if gpu in parsed:
            raise ValueError(f"prices GPU type {gpu} twice")
        parsed[gpu] = value
    return parsed


def prices(raw: str) -> str:
    """MODAL_PRICES as written, once it reads as a price table (the driver parses it with `price_table`)."""
    price_table(raw)
    return raw


def gpu_types(raw: str) -> tuple[str, ...]:
    """A comma list of Modal GPU types (`L4,A10`), as Modal spells them (upper case)."""
    return tuple(gpu.upper() for gpu in names(raw))


def regions(raw: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`eu=eu;us=us-east,us-west` → (("eu", ("eu",)), ("us", ("us-east", "us-west"))): a request's region → Modal's."""
    parsed: dict[str, tuple[str, ...]] = {}
    for part in (piece.strip() for piece in raw.split(";")):
        if not part:
            continue
        region, sep, modal_regions = part.partition("=")
        region = region.strip()
        if not sep or not region or not names(modal_regions):
            raise ValueError("must read region=MODAL_REGION,...;region=... (e.g. eu=eu;us=us-east,us-west)")
        if region in parsed:
            raise ValueError(f"names region {region!r} twice")
        parsed[region] = names(modal_regions)
    return tuple(parsed.items())


@dataclass(init=False, repr=False, eq=False)  # methods: SettingsSection's
class ModalSettings(SettingsSection):
    """Modal's API, the workspace's token, and what a Sandbox of each kind and GPU class is made from."""

    modal_token_id: str | None = setting(None, local="the token id (AWS: MODAL_TOKEN_SECRET_ARN)")
    modal_token_secret: Secret | None = setting(
        None, local="the token secret (AWS: MODAL_TOKEN_SECRET_ARN)", parse=Secret
    )
    modal_token_secret_arn: str | None = setting(None, parameter="ModalTokenSecretArn")
    modal_server_url: str | None = setting(None, local="another Modal API server (the tests' fake); empty: Modal's")
    modal_app_name: str = setting("openalice-scheduler-workers", parameter="ModalAppName")
    modal_renderer_image: str | None = setting(None, parameter="ModalRendererImage")
    modal_anim_image: str | None = setting(None, parameter="ModalAnimImage")
    modal_gpu_types_entry: tuple[str, ...] = setting(("L4",), parameter="ModalGpuTypesEntry", parse=gpu_types)
    modal_gpu_types_mid: tuple[str, ...] = setting(("A100-80GB",), parameter="ModalGpuTypesMid", parse=gpu_types)
    modal_gpu_types_high: tuple[str, ...] = setting(("H100",), parameter="ModalGpuTypesHigh", parse=gpu_types)
    modal_prices: str = setting(DEFAULT_PRICES, parameter="ModalPrices", parse=prices)
    modal_worker_port: int = setting(8080, parameter="ModalWorkerPort", low=1, high=65535)
    # Regions a request may name, each a list of Modal regions (`eu=eu;us=us-east,us-west`).
    modal_regions: tuple[tuple[str, tuple[str, ...]], ...] = setting((), parameter="ModalRegions", parse=regions)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """The settings, refused unless MODAL_PRICES prices every GPU type a class may be served with."""
        parsed = super().from_environ(environ)
        refuse_unpriced_gpu_types(parsed)
        return parsed


def refuse_unpriced_gpu_types(settings: ModalSettings) -> None:
    """ConfigurationError naming each MODAL_GPU_TYPES_* entry that MODAL_PRICES (defaults included) has no price
    for: a worker of it would be recorded at no cost, past every budget and `max_cost_per_hour`."""
    priced = price_table(settings.modal_prices)
    missing = [
        f"{variable} names {', '.join(gpu for gpu in listed if gpu.upper() not in priced)}"
        for variable, listed in (
            ("MODAL_GPU_TYPES_ENTRY", settings.modal_gpu_types_entry),
            ("MODAL_GPU_TYPES_MID", settings.modal_gpu_types_mid),
            ("MODAL_GPU_TYPES_HIGH", settings.modal_gpu_types_high),
        )
        if any(gpu.upper() not in priced for gpu in listed)
    ]
    if missing:
        raise ConfigurationError(
            f"invalid configuration: {'; '.join(missing)}, which MODAL_PRICES does not price: add GPU=USD_PER_HOUR"
            " for each to MODAL_PRICES (a worker is never made at an unknown price)"
        )


SETTINGS = ModalSettings
# A read of an active lease does not ask Modal about its Sandbox: the functions that only read leases
# never load the Modal client (the sweep's readiness pass and the reconciler do).
CHECKED_ON_READ = False


def build(settings: ModalSettings) -> Provider:
    """The driver (imports `modal`)."""
    from scheduler.providers.modal.driver import from_settings

    return from_settings(settings)
