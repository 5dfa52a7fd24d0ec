"""Builds the configured providers from `PROVIDERS`, importing each driver only when first used."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from threading import Lock

from scheduler.config import Settings
from scheduler.errors import ConfigurationError
from scheduler.providers.base import Provider

# Module paths, not imports: a function that never calls a provider never loads its SDK.
_DRIVERS: dict[str, str] = {
    "local-docker": "scheduler.providers.local_docker",
    "runpod": "scheduler.providers.runpod",
}

# Providers whose worker GET /v1/lease/{id} may check: one cheap call, no API quota spent (RunPod's
# API allows 60 requests a minute per account, so its stopped pods are left to the reconciler).
CHECKED_ON_READ = frozenset({"local-docker"})

ProviderFactory = Callable[[Settings], Provider]


def known_providers() -> tuple[str, ...]:
    """The provider names `PROVIDERS` may list."""
    return tuple(_DRIVERS)


class ProviderRegistry:
    """The configured providers in policy order; unknown names refuse to start."""

    def __init__(
        self,
        settings: Settings,
        factories: dict[str, ProviderFactory] | None = None,
        wrap: Callable[[Provider], Provider] | None = None,
    ) -> None:
        unknown = [name for name in settings.providers if name not in _DRIVERS and name not in (factories or {})]
        if unknown:
            raise ConfigurationError(
                f"unknown provider(s) in PROVIDERS: {', '.join(unknown)}; known: {', '.join(_DRIVERS)}"
            )
        if not settings.providers:
            raise ConfigurationError("PROVIDERS names no provider")
        self._settings = settings
        self._factories = dict(factories or {})
        self._wrap = wrap
        self._built: dict[str, Provider] = {}
        self._lock = Lock()

    @property
    def names(self) -> tuple[str, ...]:
        """Configured provider names, in policy order."""
        return self._settings.providers

    def get(self, name: str) -> Provider:
        """The driver for `name`, built on first use."""
        if name not in self._settings.providers:
            raise ConfigurationError(f"provider {name!r} is not configured")
        with self._lock:
            if name not in self._built:
                self._built[name] = self._build(name)
            return self._built[name]

    def __iter__(self) -> Iterator[Provider]:
        return (self.get(name) for name in self.names)

    def in_order(self) -> Sequence[Provider]:
        """Every configured driver, in policy order."""
        return list(self)

    def warm(self) -> None:
        """Import and build every driver now (used at init where the first request must be fast)."""
        self.in_order()

    def _build(self, name: str) -> Provider:
        factory = self._factories.get(name)
        if factory is None:
            module = importlib.import_module(_DRIVERS[name])
            factory = module.from_settings
        driver = factory(self._settings)
        return self._wrap(driver) if self._wrap else driver
