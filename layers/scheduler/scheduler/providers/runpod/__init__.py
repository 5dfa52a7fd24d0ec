"""The `runpod` provider: one GPU pod per lease through RunPod's REST API v2.

This package's settings are read by every function (they are light); the driver (`driver.py`, the
only code that speaks RunPod's API) loads only when first used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.config import Secret, SettingsSection, names, one_of, setting

if TYPE_CHECKING:
    from scheduler.providers.base import Provider
    from scheduler.store import LeaseStore

NAME = "runpod"


def regions(raw: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`eu=EU-RO-1,EU-SE-1;us=US-TX-3` → (("eu", ("EU-RO-1", "EU-SE-1")), ("us", ("US-TX-3",)))."""
    parsed: dict[str, tuple[str, ...]] = {}
    for part in (piece.strip() for piece in raw.split(";")):
        if not part:
            continue
        region, sep, centers = part.partition("=")
        region = region.strip()
        if not sep or not region or not names(centers):
            raise ValueError("must read region=DC1,DC2;region=DC3 (e.g. eu=EU-RO-1,EU-SE-1;us=US-TX-3)")
        if region in parsed:
            raise ValueError(f"names region {region!r} twice")
        parsed[region] = names(centers)
    return tuple(parsed.items())


@dataclass(init=False, repr=False, eq=False)  # methods: SettingsSection's
class RunPodSettings(SettingsSection):
    """RunPod's API, the account's key, and what a pod of each kind and GPU class is made from."""

    runpod_api_url: str = setting("https://api.runpod.io", parameter="RunpodApiUrl")
    runpod_api_key: Secret | None = setting(None, local="the key itself (AWS: RUNPOD_API_KEY_SECRET_ARN)", parse=Secret)
    runpod_api_key_secret_arn: str | None = setting(None, parameter="RunpodApiKeySecretArn")
    runpod_renderer_template: str | None = setting(None, parameter="RunpodRendererTemplate")
    runpod_anim_template: str | None = setting(None, parameter="RunpodAnimTemplate")
    runpod_gpu_types_entry: tuple[str, ...] = setting(
        ("NVIDIA GeForce RTX 4090",), parameter="RunpodGpuTypesEntry", parse=names
    )
    runpod_gpu_types_mid: tuple[str, ...] = setting(
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"), parameter="RunpodGpuTypesMid", parse=names
    )
    runpod_gpu_types_high: tuple[str, ...] = setting(
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"), parameter="RunpodGpuTypesHigh", parse=names
    )
    runpod_http_port: int = setting(8080, parameter="RunpodHttpPort", low=1, high=65535)
    # `listed`: a class's GPU types in the order above; `cheapest`: by catalog price, cheapest first.
    runpod_gpu_order: str = setting("listed", parameter="RunpodGpuOrder", parse=one_of("listed", "cheapest"))
    # Regions a request may name, each a list of RunPod data centers: `eu=EU-RO-1,EU-SE-1;us=US-TX-3`.
    runpod_regions: tuple[tuple[str, tuple[str, ...]], ...] = setting((), parameter="RunpodRegions", parse=regions)


SETTINGS = RunPodSettings
# RunPod's API allows 60 requests a minute per account: its stopped pods are left to the reconciler,
# never looked up from a GET.
CHECKED_ON_READ = False


# `build` takes the lease store: the account's API quota is one budget in its counters table.
USES_STORE = True


def build(settings: RunPodSettings, store: LeaseStore | None = None) -> Provider:
    """The driver (imports requests), pacing its calls against the account's shared API budget."""
    from scheduler.providers.runpod.driver import from_settings
    from scheduler.providers.runpod.quota import LocalBudget, QuotaStore, RequestBudget

    shared: QuotaStore = LocalBudget()
    if store is not None:
        from scheduler.store.api_budget import ApiBudget

        shared = ApiBudget(store.table_name, store.client, counters_table=store.counters_table)
    return from_settings(settings, RequestBudget(shared))
