"""`make sam-local`: what `sam local invoke|start-api` needs, on loopback, until Ctrl-C / SIGTERM.

python -m devstack.sam_local [--state-dir .local/sam] [--docker-state-dir .local/docker] [--port N]

- the embedded DynamoDB (moto's server mode) with every table of template.yaml; the same server
  answers Secrets Manager and STS, so every AWS call of the functions and of SAM itself stays here;
- the TLS dev Docker host (shared with `make run`) with the worker images, for the workers the
  functions create and for SAM's own containers;
- the Lambda base image stand-in (scripts/build-lambda-base-image, cached) on that host;
- two secrets, as the deployed stack reads them: the internal secret (`INTERNAL_SECRET_ARN`) and the
  Docker host's client certificates as JSON `ca`/`cert`/`key`/`host` (`DOCKER_TLS_SECRET_ARN`) —
  SAM cannot mount DOCKER_CERT_PATH into the function containers, and this is the deployed path.

It writes, and removes again when it stops:
  <state-dir>/env.json   `sam local ... --env-vars` (the functions' variables; SAM passes on only the
                         variables template.yaml declares)
  <state-dir>/sam.env    the SAM process's own environment (DOCKER_*, AWS_ENDPOINT_URL, placeholder
                         credentials), which scripts/sam reads
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.docker_host import TlsDockerHost, start_tls_docker_host
from devstack.dynamodb import FAKE_CREDENTIALS, EmbeddedDynamoDB
from devstack.stack import STATE_DIR, create_template_tables, internal_secret
from devstack.template import REPO, SamTemplate
from devstack.worker_image import ensure_worker_images

BASE_IMAGE_SCRIPT = REPO / "scripts" / "build-lambda-base-image"
# Secrets' names, not values.
INTERNAL_SECRET_NAME = "openalice-scheduler/internal-secret"  # noqa: S105  # nosec B105
DOCKER_TLS_SECRET_NAME = "openalice-scheduler/docker-tls"  # noqa: S105  # nosec B105
# The variable that points the functions' AWS SDK at the embedded moto.
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
# The worker containers join no network: the dev Docker host runs without a bridge.
WORKER_NETWORK = "none"


def _progress(message: str) -> None:
    print(f"[sam-local] {message}", file=sys.stderr, flush=True)


@dataclass
class SamLocalParts:
    """The running parts and the files that point `sam local` at them."""

    state_dir: Path
    database: EmbeddedDynamoDB
    docker_host: TlsDockerHost
    env_vars_file: Path
    sam_env_file: Path
    _cleanups: list[Any] = field(default_factory=list)

    def stop(self) -> None:
        """Remove the files, stop the embedded DynamoDB, and the Docker host if this started it."""
        self.env_vars_file.unlink(missing_ok=True)
        self.sam_env_file.unlink(missing_ok=True)
        while self._cleanups:
            self._cleanups.pop()()


def start(
    state_dir: Path,
    docker_state_dir: Path,
    *,
    port: int | None = None,
    base_image: bool = True,
    template: SamTemplate | None = None,
) -> SamLocalParts:
    """Start every part and write `env.json` and `sam.env` into `state_dir`."""
    template = template or SamTemplate.load()
    require_endpoint_variable(template)
    state_dir.mkdir(parents=True, exist_ok=True)
    cleanups: list[Any] = []
    try:
        database = EmbeddedDynamoDB.start(port=port)
        cleanups.append(database.stop)
        _progress(f"embedded DynamoDB, Secrets Manager and STS (moto server) on {database.endpoint_url}")
        table_names, _ = create_template_tables(database.client(), template)

        host = start_tls_docker_host(docker_state_dir)
        if not host.reused:
            cleanups.append(host.stop)
        client = host.client()
        try:
            images = ensure_worker_images(client)
        finally:
            client.close()
        _progress(f"TLS Docker host {host.host} (certificates in {host.cert_path}); worker images {images}")
        if base_image:
            build_base_image(host.env())

        secret, _ = internal_secret(STATE_DIR)
        secrets = database.client("secretsmanager")
        internal_secret_arn = _put_secret(secrets, INTERNAL_SECRET_NAME, secret)
        docker_tls_arn = _put_secret(secrets, DOCKER_TLS_SECRET_NAME, json.dumps(docker_tls_secret(host)))
        _progress(f"secrets {INTERNAL_SECRET_NAME}, {DOCKER_TLS_SECRET_NAME} in the embedded Secrets Manager")

        env_vars = functions_env_vars(
            database.endpoint_url, table_names, host, docker_tls_arn, internal_secret_arn, images
        )
        env_vars_file = state_dir / "env.json"
        _write(env_vars_file, json.dumps(env_vars, indent=2) + "\n")
        sam_env_file = state_dir / "sam.env"
        _write(sam_env_file, "".join(f"{key}={value}\n" for key, value in sam_process_env(database, host).items()))
    except BaseException:
        for cleanup in reversed(cleanups):
            cleanup()
        raise
    parts = SamLocalParts(state_dir, database, host, env_vars_file, sam_env_file)
    parts._cleanups = cleanups
    return parts


def require_endpoint_variable(template: SamTemplate) -> None:
    """Refuse to start unless the functions can be pointed at the embedded moto.

    SAM passes a function only the variables the template declares, so without `AWS_ENDPOINT_URL`
    in Globals the functions would send their DynamoDB and Secrets Manager calls to AWS.
    """
    variables = template.raw.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    if ENDPOINT_VARIABLE not in variables:
        raise SystemExit(
            f"[sam-local] template.yaml does not declare {ENDPOINT_VARIABLE} in Globals (as `!Ref AWS::NoValue`): "
            "sam local would hand the functions no endpoint and they would call AWS (docs/sam-local.md)"
        )


def functions_env_vars(
    endpoint_url: str,
    table_names: dict[str, str],
    host: TlsDockerHost,
    docker_tls_secret_arn: str,
    internal_secret_arn: str,
    images: dict[str, str],
) -> dict[str, dict[str, str]]:
    """The `--env-vars` document: values for variables the template declares (SAM ignores any other)."""
    return {
        "Parameters": {
            # Declared in Globals for this purpose only; CloudFormation drops it (AWS::NoValue).
            ENDPOINT_VARIABLE: endpoint_url,
            **table_names,
            "PROVIDERS": "local-docker",
            "DOCKER_HOST": host.host,
            "DOCKER_TLS_SECRET_ARN": docker_tls_secret_arn,
            "DOCKER_NETWORK": WORKER_NETWORK,
            "RENDERER_IMAGE": images["renderer"],
            "ANIM_IMAGE": images["anim"],
            "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
            "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler",
            "LOG_LEVEL": "INFO",
            "POWERTOOLS_LOG_LEVEL": "INFO",
        },
        "AuthorizerFunction": {"INTERNAL_SECRET_ARN": internal_secret_arn},
    }


def sam_process_env(database: EmbeddedDynamoDB, host: TlsDockerHost) -> dict[str, str]:
    """SAM's own environment: the Docker host it runs containers on, and AWS calls kept on loopback."""
    return {
        **host.env(),
        # SAM asks STS for the account id on every local invoke; the embedded moto answers.
        "AWS_ENDPOINT_URL": database.endpoint_url,
        **{key: FAKE_CREDENTIALS[key] for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")},
        "AWS_REGION": FAKE_CREDENTIALS["AWS_REGION"],
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def docker_tls_secret(host: TlsDockerHost) -> dict[str, str]:
    """The client side of the host's mutual TLS, as the deployed functions read it from Secrets Manager."""
    return {
        "ca": (host.cert_path / "ca.pem").read_text(),
        "cert": (host.cert_path / "cert.pem").read_text(),
        "key": (host.cert_path / "key.pem").read_text(),
        "host": host.host,
    }


def build_base_image(docker_env: dict[str, str]) -> None:
    """Run scripts/build-lambda-base-image against the Docker host (a no-op when the image is current)."""
    environment = {**os.environ, **docker_env}
    result = subprocess.run(  # noqa: S603 - our own script, fixed argv  # nosec B603
        [str(BASE_IMAGE_SCRIPT)], env=environment, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"[sam-local] {BASE_IMAGE_SCRIPT.name} failed (exit {result.returncode})")


def _put_secret(client: Any, name: str, value: str) -> str:
    return str(client.create_secret(Name=name, SecretString=value)["ARN"])


def _write(path: Path, text: str) -> None:
    """Write with mode 0600: the files name the secrets' ARNs and the Docker host's client certs."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _shown(path: Path) -> str:
    """`path` relative to the working directory when it lies below it."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative


def main(argv: list[str] | None = None) -> int:
    """Start the parts, print how to use them, and wait for Ctrl-C / SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m devstack.sam_local", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_state_dir = Path(os.environ.get("SAM_LOCAL_STATE_DIR") or STATE_DIR / "sam")
    parser.add_argument("--state-dir", type=Path, default=default_state_dir)
    parser.add_argument("--docker-state-dir", type=Path, default=STATE_DIR / "docker")
    parser.add_argument("--port", type=int, default=None, help="the embedded DynamoDB's port (default: a free one)")
    parser.add_argument(
        "--no-base-image",
        action="store_true",
        help="do not build the Lambda base image stand-in (the registry's image can be pulled)",
    )
    args = parser.parse_args(argv)
    parts = start(
        args.state_dir.resolve(), args.docker_state_dir.resolve(), port=args.port, base_image=not args.no_base_image
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    env_vars = _shown(parts.env_vars_file)
    _progress(f"--env-vars {env_vars}; SAM's own environment in {_shown(parts.sam_env_file)}")
    _progress("ready: in another terminal, `make build`, then for example")
    _progress(f"  scripts/sam local invoke HealthFunction -e events/health.json --env-vars {env_vars}")
    _progress(f"  scripts/sam local start-api --env-vars {env_vars}")
    try:
        while not stop.wait(0.5):
            pass
    finally:
        _progress("stopping ...")
        parts.stop()
        _progress("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
