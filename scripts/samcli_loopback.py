"""SAM CLI with `--docker-network host` that works: run by scripts/sam with .venv-sam's Python.

SAM CLI 1.170.0 creates every function container with a published port (127.0.0.1:<port> -> 8080,
where its runtime interface emulator listens) and, for `--docker-network host`, only skips the
network connect: the container lands on the default bridge anyway (aws/aws-sam-cli#4236). Two
consequences: code in the container cannot reach services on the machine's loopback (the embedded
DynamoDB, a loopback Docker host), and on a daemon without a bridge (`dockerd --bridge=none`) the
container gets no network at all, so SAM cannot reach the emulator and times out.

With `--docker-network host` this creates the container in the host's network namespace instead, and
has the emulator listen where SAM will call it, 127.0.0.1:<the port SAM chose>, with its Runtime API on
another free loopback port (in the host's namespace the defaults, 0.0.0.0:8080 and 127.0.0.1:9001,
would expose the emulator on every interface and collide between containers: aws/aws-sam-cli#6347).
Nothing changes without `--docker-network host`.

The patch depends on SAM CLI internals, so it refuses any version but the one it was written for.
"""

from __future__ import annotations

import sys
from typing import Any

SAM_CLI_VERSION = "1.170.0"  # as pinned in requirements-sam.txt
RIE = "/var/rapid/aws-lambda-rie"
LOOPBACK = "127.0.0.1"
# Where the emulator's Runtime API listens: apart from SAM's own 5000-9000 range for the invoke port.
RUNTIME_API_PORTS = (9100, 9999)


def emulator_entrypoint(entrypoint: list[str], invoke_port: int, runtime_api_port: int) -> list[str]:
    """`entrypoint` with the emulator bound to loopback ports (unchanged when it does not start the emulator)."""
    if not entrypoint or entrypoint[0] != RIE:
        return entrypoint
    return [
        RIE,
        "--runtime-interface-emulator-address",
        f"{LOOPBACK}:{invoke_port}",
        "--runtime-api-address",
        f"{LOOPBACK}:{runtime_api_port}",
        *entrypoint[1:],
    ]


def patch_host_network() -> None:
    """Make `--docker-network host` put SAM's containers in the host's network namespace."""
    import docker.models.containers
    from samcli.local.docker.container import Container
    from samcli.local.docker.utils import find_free_port

    create_container = Container.create
    if getattr(create_container, "_loopback_patch", False):
        return

    def create(self: Any, context: Any) -> Any:
        if self.network_id == "host":
            api_port = find_free_port(network_interface=LOOPBACK, start=RUNTIME_API_PORTS[0], end=RUNTIME_API_PORTS[1])
            self._entrypoint = emulator_entrypoint(list(self._entrypoint or []), self.rapid_port_host, api_port)
            self._container_opts = {**(self._container_opts or {}), "network_mode": "host"}
        return create_container(self, context)

    create._loopback_patch = True  # type: ignore[attr-defined]
    Container.create = create

    create_in_engine = docker.models.containers.ContainerCollection.create

    def create_without_ports(self: Any, image: str, command: Any = None, **kwargs: Any) -> Any:
        # In the host's namespace there is nothing to publish (docker-py refuses the combination).
        if kwargs.get("network_mode") == "host":
            kwargs.pop("ports", None)
        return create_in_engine(self, image, command, **kwargs)

    docker.models.containers.ContainerCollection.create = create_without_ports


def no_version_check() -> None:
    """The CLI is pinned: its weekly call to PyPI for a newer version only prints noise."""
    from samcli.lib.utils import version_checker

    version_checker._inform_newer_version = lambda force_check=False: None


def main() -> int:
    """Check the pinned version, patch, and hand over to SAM CLI's own entry point."""
    import samcli

    if samcli.__version__ != SAM_CLI_VERSION:
        print(
            f"scripts/sam: written for SAM CLI {SAM_CLI_VERSION} (requirements-sam.txt), found {samcli.__version__}; "
            "run `make validate` to reinstall .venv-sam, or review scripts/samcli_loopback.py for the new version",
            file=sys.stderr,
        )
        return 2
    patch_host_network()
    no_version_check()
    from samcli.cli.main import cli

    sys.argv[0] = "sam"
    cli()
    return 0


if __name__ == "__main__":
    sys.exit(main())
