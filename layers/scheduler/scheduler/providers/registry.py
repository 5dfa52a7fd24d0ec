"""The providers `PROVIDERS` may name: each name → the package of its settings and driver, ONE line each.

Adding a provider is one line here plus its package `providers/<name>/`: a `SETTINGS` class (its
variables, read with the rest of the configuration), `CHECKED_ON_READ`, and `build(settings)`
returning a `providers.base.Provider` that passes `tests/providers/test_contract.py`. Its cap
`<NAME>_MAX_LEASES` (template parameter `<Name>MaxLeases`) comes with the name.

Module paths, not imports: nothing loads until used, so every function can read this at init.
"""

from __future__ import annotations

import importlib
from types import ModuleType

PROVIDERS: dict[str, str] = {
    "local-docker": "scheduler.providers.local_docker",
    "runpod": "scheduler.providers.runpod",
    "modal": "scheduler.providers.modal",
}


def known_providers() -> tuple[str, ...]:
    """The provider names `PROVIDERS` may list."""
    return tuple(PROVIDERS)


def provider_package(name: str) -> ModuleType:
    """The package of a known provider (its settings and `build`; the driver itself loads in `build`)."""
    return importlib.import_module(PROVIDERS[name])
