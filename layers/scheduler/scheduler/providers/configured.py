"""The configured providers, in policy order: each driver built (and its SDK imported) on first use."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from threading import Lock
from typing import TYPE_CHECKING, Any

from scheduler.errors import ConfigurationError
from scheduler.providers.registry import PROVIDERS, provider_package

if TYPE_CHECKING:
    from scheduler.config import Settings
    from scheduler.providers.base import PlaceCounter, Provider

ProviderFactory = Callable[["Settings"], "Provider"]


class ConfiguredProviders:
    """The configured providers in policy order; unknown names refuse to start.

    `factories` replaces the build of named providers (tests, benchmarks: an in-memory driver);
    `wrap` wraps every driver built (production: metrics and spans around each call).
    """

    def __init__(
        self,
        settings: Settings,
        factories: dict[str, ProviderFactory] | None = None,
        wrap: Callable[[Provider], Provider] | None = None,
        store: Callable[[], Any] | None = None,
    ) -> None:
        unknown = [name for name in settings.providers if name not in PROVIDERS and name not in (factories or {})]
        if unknown:
            raise ConfigurationError(
                f"unknown provider(s) in PROVIDERS: {', '.join(unknown)}; known: {', '.join(PROVIDERS)}"
            )
        if not settings.providers:
            raise ConfigurationError("PROVIDERS names no provider")
        self._settings = settings
        self._factories = dict(factories or {})
        self._wrap = wrap
        self._store = store  # the lease store, for drivers that keep shared counters (host slots, API budget)
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

    def place_counters(self) -> list[PlaceCounter]:
        """The live-lease counters the configured providers keep for places of their own (a fleet's hosts)."""
        return [counter for provider in self for counter in provider.place_counters()]

    def checked_on_read(self) -> frozenset[str]:
        """The configured providers whose worker a read may check: one cheap call, no API quota spent."""
        return frozenset(name for name in self.names if name in PROVIDERS and provider_package(name).CHECKED_ON_READ)

    def _build(self, name: str) -> Provider:
        factory = self._factories.get(name)
        if factory is not None:
            driver = factory(self._settings)
        else:
            package = provider_package(name)
            section = self._settings.section(name, package.SETTINGS)
            if getattr(package, "USES_STORE", False):
                driver = package.build(section, self._store() if self._store else None)
            else:
                driver = package.build(section)
        return self._wrap(driver) if self._wrap else driver
