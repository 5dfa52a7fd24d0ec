"""A fleet of Docker hosts: `DOCKER_HOSTS`, a JSON list of the engines `local-docker` places leases on.

    [{"name": "gpu-a", "host": "tcp://10.0.0.5:2376", "cert_path": "/etc/docker-tls/gpu-a",
      "max_leases": 8, "gpus": ["none", "entry"], "region": "eu-west"}]

- `name`: how leases, tokens (`<name>/<container id>`), counters and metrics name the host;
- `host`: its Engine API address, as DOCKER_HOST;
- `cert_path`: its ca.pem, cert.pem, key.pem (locally); in AWS the TLS secret holds them instead,
  under `hosts.<name>` (or shared at the top level);
- `max_leases`: live leases it takes at most (atomic, a counter like the provider caps); absent: no cap;
- `gpus`: the GPU classes it serves (default `["none"]`: CPU workers only);
- `region`: where it is; a request that names a region goes only to hosts there.

Light on purpose: every function parses the settings; only the driver imports the Docker SDK.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import NamedTuple

# Matched whole (fullmatch): `$` would also match before a final newline ("gpu-a\n").
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_GPU_CLASSES = ("none", "entry", "mid", "high")
_KEYS = {"name", "host", "cert_path", "max_leases", "gpus", "region"}
# The name DOCKER_HOST takes when it joins a fleet (and under which its fleet tokens stay its own without one).
DEFAULT_HOST_NAME = "default"
# A host that did not answer is passed over for this long (per execution environment).
DOWN_SECONDS = 30.0


class DockerHostSpec(NamedTuple):
    """One Docker host of the fleet."""

    name: str
    host: str
    cert_path: str | None = None
    max_leases: int | None = None
    gpus: tuple[str, ...] = ("none",)
    region: str | None = None

    def counter(self, provider: str) -> str:
        """Its live-lease counter: `host#local-docker#<name>`."""
        return f"host#{provider}#{self.name}"

    def docker_environment(self) -> dict[str, str]:
        """DOCKER_* for this host, as the docker CLI takes them."""
        environment = {"DOCKER_HOST": self.host}
        if self.cert_path:
            environment.update({"DOCKER_CERT_PATH": self.cert_path, "DOCKER_TLS_VERIFY": "1"})
        return environment


def parse_hosts(raw: str) -> tuple[DockerHostSpec, ...]:
    """DOCKER_HOSTS: a JSON list of hosts (ValueError, saying what is wrong, otherwise)."""
    try:
        document = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"must be a JSON list of hosts: {error}") from None
    if not isinstance(document, list) or not document:
        raise ValueError("must be a non-empty JSON list of hosts")
    hosts = tuple(_host(entry, index) for index, entry in enumerate(document))
    names = [host.name for host in hosts]
    if len(set(names)) != len(names):
        raise ValueError(f"host names must be unique: {names}")
    return hosts


def parse_retired_hosts(raw: str) -> tuple[str, ...]:
    """DOCKER_RETIRED_HOSTS: a comma list of host names the operator took away for good (ValueError otherwise)."""
    names = tuple(part.strip() for part in raw.split(",") if part.strip())
    bad = [name for name in names if not _NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"must be a comma list of host names (each 1-40 of a-z, 0-9 and '-'); not {bad}")
    return names


def _host(entry: object, index: int) -> DockerHostSpec:
    where = f"host {index}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object")
    unknown = set(entry) - _KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    name, host = entry.get("name"), entry.get("host")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{where}: name must be 1-40 of a-z, 0-9 and '-' (got {name!r})")
    if not isinstance(host, str) or not re.match(r"^(tcp|unix|ssh|https?)://", host):
        raise ValueError(f"{where} ({name}): host must be an Engine address such as tcp://10.0.0.5:2376")
    cap = entry.get("max_leases")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 0):
        raise ValueError(f"{where} ({name}): max_leases must be a whole number ≥ 0")
    gpus = entry.get("gpus", ["none"])
    if not isinstance(gpus, list) or not gpus or any(gpu not in _GPU_CLASSES for gpu in gpus):
        raise ValueError(f"{where} ({name}): gpus must be a list of {', '.join(_GPU_CLASSES)}")
    cert_path, region = entry.get("cert_path"), entry.get("region")
    for key, value in (("cert_path", cert_path), ("region", region)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{where} ({name}): {key} must be a non-empty string")
    return DockerHostSpec(name, host, cert_path, cap, tuple(gpus), region)


class DownHosts:
    """Hosts that failed to answer lately, passed over until `DOWN_SECONDS` have passed (thread-safe)."""

    def __init__(self, seconds: float = DOWN_SECONDS) -> None:
        self._seconds = seconds
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def mark(self, name: str) -> None:
        with self._lock:
            self._until[name] = time.monotonic() + self._seconds

    def clear(self, name: str) -> None:
        with self._lock:
            self._until.pop(name, None)

    def is_down(self, name: str) -> bool:
        with self._lock:
            until = self._until.get(name)
            if until is not None and until <= time.monotonic():
                del self._until[name]
                return False
            return until is not None
