"""`make run`: every moving part of the deployed system, on loopback, in one foreground process.

API Gateway (routes and authorizer from template.yaml) → Lambda environments (one pool per
function) → moto's DynamoDB (table from the template) with TTL and the stream emulated → the
stream handler, the scheduled sweep and the reconciler → a real Docker host over mutual TLS.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.auth import bootstrap_token, local_principals
from devstack.dynamodb import FAKE_CREDENTIALS, EmbeddedDynamoDB, create_table
from devstack.dynamodb_faults import Faults
from devstack.dynamodb_locks import ITEMS
from devstack.dynamodb_snapshot import TableSnapshots
from devstack.gateway import LocalHttpApi
from devstack.lambda_api import LocalLambdaApi
from devstack.lambdas import FunctionError, LocalLambda
from devstack.messaging import LocalMessaging
from devstack.schedules import Schedule
from devstack.settings import check_function_settings, fleet_hosts, seconds
from devstack.sigv4 import Principal
from devstack.streams import StreamMapping
from devstack.template import REPO, SamTemplate
from devstack.ttl import TtlEmulator

log = logging.getLogger("devstack")

STATE_DIR = REPO / ".local"
DEFAULT_TABLE = "openalice-scheduler-leases"
# Which environment variable sets each scheduled function's local period (the template's rate
# expressions are for AWS; locally they are seconds so tests and demos need not wait minutes).
SCHEDULE_INTERVALS = {
    "SweepExpiredFunction": ("SWEEP_INTERVAL_SECONDS", 60.0),
    "ReconcileWorkersFunction": ("RECONCILE_INTERVAL_SECONDS", 300.0),
}
# `make run`'s own defaults for template parameters (documented in the README): containers on network
# `none` (the dev host has no bridge); the worker images are the dev images it imports.
LOCAL_PARAMETER_DEFAULTS = {"DOCKER_NETWORK": "none"}
# Library switches for debugging locally, passed on when set (the README names them); never in the template.
LOCAL_DEBUG_VARIABLES = ("POWERTOOLS_DEBUG",)


def local_only_variables() -> dict[str, str]:
    """The functions' local-only variables (INTERNAL_SECRET, DOCKER_CERT_PATH, RUNPOD_API_KEY, …) that are set."""
    from scheduler.config import Settings, SettingsSection, provider_settings
    from scheduler.providers.registry import known_providers

    sections: list[type[SettingsSection]] = [Settings, *(provider_settings(name) for name in known_providers())]
    names = [variable for section in sections for variable, (source, _) in section.variables().items() if source.local]
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def local_sweep_interval() -> dict[str, str]:
    """The local sweep's period, which the functions read too (the daily budget reserves it past each
    lease's expiry): the template gives them AWS's schedule, `make run` its own when set."""
    variable, _ = SCHEDULE_INTERVALS["SweepExpiredFunction"]
    return {variable: os.environ[variable].strip()} if os.environ.get(variable, "").strip() else {}


def _progress(message: str) -> None:
    print(f"[devstack] {message}", file=sys.stderr, flush=True)


def internal_secret(state_dir: Path) -> tuple[str, str | None]:
    """INTERNAL_SECRET from the environment, else the one kept with mode 0600 under .local/ (generated the first
    time); with a line saying where it came from when not from the environment."""
    if os.environ.get("INTERNAL_SECRET"):
        return os.environ["INTERNAL_SECRET"], None
    path = state_dir / "internal-secret"
    note = f"INTERNAL_SECRET not set; reusing the one in {path}"
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
        note = f"INTERNAL_SECRET not set; generated one in {path} (mode 0600)"
    path.chmod(0o600)
    return path.read_text().strip(), note


@dataclass
class DockerTarget:
    """The Docker host the functions provision on, and how the stack got it."""

    environment: dict[str, str]
    started: Any = None  # a TlsDockerHost this stack started and must stop


def docker_target(state_dir: Path) -> DockerTarget:
    """The configured Docker host; else a local engine that answers; else a loopback TLS dev host.

    Without RENDERER_IMAGE/ANIM_IMAGE the busybox dev worker image is imported on the chosen host.
    """
    if os.environ.get("DOCKER_HOSTS", "").strip():
        return _fleet_target()
    if os.environ.get("DOCKER_HOST"):
        _progress(f"Docker host from the environment: {os.environ['DOCKER_HOST']}")
        target = DockerTarget({})
    elif _local_engine_answers():
        _progress(f"using the local Docker engine at {_LOCAL_ENGINE}")
        target = DockerTarget({"DOCKER_HOST": _LOCAL_ENGINE})
    else:
        from devstack.docker_host import start_tls_docker_host

        host = start_tls_docker_host(state_dir / "docker")
        target = DockerTarget(host.env(), started=None if host.reused else host)
    if not (os.environ.get("RENDERER_IMAGE") and os.environ.get("ANIM_IMAGE")):
        _ensure_dev_images({**os.environ, **target.environment})
    return target


_LOCAL_ENGINE = "unix:///var/run/docker.sock"


def _fleet_target() -> DockerTarget:
    """DOCKER_HOSTS: a fleet, passed to the functions as it is; the dev worker images imported on each host."""
    hosts = fleet_hosts(os.environ)
    for spec in hosts:
        cap = "no cap" if spec.max_leases is None else f"max {spec.max_leases} leases"
        _progress(f"fleet host {spec.name}: {spec.host} ({cap}, gpus {','.join(spec.gpus)})")
    if not (os.environ.get("RENDERER_IMAGE") and os.environ.get("ANIM_IMAGE")):
        for spec in hosts:
            _ensure_dev_images({**os.environ, **spec.docker_environment()})
    return DockerTarget({})


def _default_name(table_id: str) -> str:
    """`LeaseCountersTable` → `openalice-scheduler-lease-counters`."""
    words = re.findall(r"[A-Z][a-z0-9]*", table_id.removesuffix("Table"))
    return "openalice-scheduler-" + "-".join(word.lower() for word in words)


def create_template_tables(
    client: Any, template: SamTemplate, leases_table: str = DEFAULT_TABLE
) -> tuple[dict[str, str], dict[str, str]]:
    """Create every table of `template` on `client` (the embedded DynamoDB).

    Returns the functions' variables mapped to the table names (`{"LEASES_TABLE": ...}`) and the
    stream ARN of each table that has a stream, by logical id. The leases table is `leases_table`;
    another table is named by its variable in the environment (`COUNTERS_TABLE=...`), else after its
    logical id (`LeaseCountersTable` → `openalice-scheduler-lease-counters`).
    """
    table_names: dict[str, str] = {}
    stream_arns: dict[str, str] = {}
    for table_id, definition in template.tables.items():
        variable = template.table_variables[table_id]
        name = leases_table if variable == "LEASES_TABLE" else os.environ.get(variable) or _default_name(table_id)
        arn = create_table(client, name, definition)
        table_names[variable] = name
        if arn:
            stream_arns[table_id] = arn
        _progress(f"table {name} ({variable}) created from template resource {table_id}")
    return table_names, stream_arns


def _local_engine_answers() -> bool:
    if not Path(_LOCAL_ENGINE.removeprefix("unix://")).exists():
        return False
    try:
        import docker

        docker.DockerClient(base_url=_LOCAL_ENGINE, timeout=3).ping()
        return True
    except Exception as error:  # noqa: BLE001 - any failure means "no local engine answers"
        _progress(f"local Docker engine not answering ({type(error).__name__}); starting a dev host")
        return False


def _ensure_dev_images(environment: dict[str, str]) -> None:
    from devstack.docker_clients import client_from_env
    from devstack.worker_image import WORKER_IMAGES, ensure_worker_images

    try:
        # The service's own client: the same TLS checks and API version negotiation as the functions.
        client = client_from_env(environment, timeout=20)
    except Exception as error:  # noqa: BLE001 - an unreachable host is the service's problem to report
        client = None
        _progress(f"could not reach the Docker host to prepare worker images ({type(error).__name__}); serving anyway")
    images = dict(WORKER_IMAGES)
    if client is not None:
        try:
            images = ensure_worker_images(client)
        except Exception as error:  # noqa: BLE001 - as above
            _progress(f"could not prepare worker images on the Docker host ({type(error).__name__}); serving anyway")
        finally:
            client.close()
    os.environ.setdefault("RENDERER_IMAGE", images["renderer"])
    os.environ.setdefault("ANIM_IMAGE", images["anim"])
    _progress(f"worker images: {images['renderer']}, {images['anim']}")


@dataclass
class LocalStack:
    """The running local stack."""

    port: int
    state_dir: Path = STATE_DIR
    table_name: str = DEFAULT_TABLE
    ttl_lag_seconds: float = 0.0
    persist: bool = True  # tables snapshot to <state_dir>/dynamodb and restored at start
    fresh: bool = False  # persisting, but start with empty tables (the old snapshot is set aside)
    snapshot_seconds: float = 5.0
    faults: Faults = field(default_factory=Faults)
    template: SamTemplate = field(default_factory=SamTemplate.load)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _cleanups: list[Any] = field(default_factory=list)
    _on_stop: list[Any] = field(default_factory=list)

    def start(self) -> None:
        """Start every part; raises (after cleaning up) if a function refuses to initialise."""
        started = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        _progress(f"ready in {time.monotonic() - started:.1f} s: http://127.0.0.1:{self.port}")

    def _start(self) -> None:
        # A bad value: one line naming it, before anything starts.
        check_function_settings(os.environ)
        intervals = {name: seconds(os.environ, *variable) for name, variable in SCHEDULE_INTERVALS.items()}
        self.state_dir.mkdir(parents=True, exist_ok=True)
        secret, secret_note = internal_secret(self.state_dir)
        if secret_note:
            _progress(secret_note)
        callers_env, principals = self._callers()
        database = EmbeddedDynamoDB.start()
        self._cleanups.append(database.stop)
        _progress(f"embedded DynamoDB (moto server) on {database.endpoint_url}")
        client = database.client()
        table_names, stream_arns = create_template_tables(client, self.template, self.table_name)
        if self.persist:
            self._restore_tables(client, tuple(table_names.values()))
        if self.faults.active:
            database.front.set_faults(self.faults)
            _progress(f"DYNAMODB_FAULTS: {self.faults.describe()} (conflicts and throttling as DynamoDB answers them)")
            injected = database.front.injected.by_code
            self._on_stop.append(lambda: _progress(f"DynamoDB faults injected: {json.dumps(injected, sort_keys=True)}"))
        self._on_stop.append(lambda: _progress(f"transaction conflicts between clients: {ITEMS.conflicts}"))

        target = docker_target(self.state_dir)
        if target.started is not None:
            if self.persist:
                # Its workers belong to leases the snapshot keeps: they must outlive this process too.
                stop_it = f"{sys.executable} -m devstack.docker_host stop --state-dir {self.state_dir / 'docker'}"
                note = f"the dev Docker host keeps running with your leases' workers; stop it with: {stop_it}"
                self._on_stop.append(lambda: _progress(note))
            else:
                self._cleanups.append(target.started.stop)
        # Through the documented variables: `make run`'s defaults, and a dev host started here where DOCKER_* stand.
        for name, value in LOCAL_PARAMETER_DEFAULTS.items():
            os.environ.setdefault(name, value)
        os.environ.update(target.environment)
        # EventBridge and SQS (lifecycle events, webhook deliveries) from the same embedded moto.
        messaging = LocalMessaging(database.endpoint_url, self.template, self.state_dir)
        messages = messaging.create()
        _progress(f"EventBridge and SQS: {', '.join(sorted(messages))} (events in {self.state_dir}/events.jsonl)")
        local = {
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL_DYNAMODB": database.endpoint_url,
            "AWS_ENDPOINT_URL_DYNAMODBSTREAMS": database.endpoint_url,
            "AWS_ENDPOINT_URL_EVENTBRIDGE": database.endpoint_url,
            "AWS_ENDPOINT_URL_SQS": database.endpoint_url,
            # Local receivers: webhooks to loopback addresses, over http too (never in AWS).
            "WEBHOOK_ALLOW_LOOPBACK": os.environ.get("WEBHOOK_ALLOW_LOOPBACK", "").strip() or "1",
            **local_only_variables(),
            **{name: os.environ[name] for name in LOCAL_DEBUG_VARIABLES if os.environ.get(name)},
            **local_sweep_interval(),
            "INTERNAL_SECRET": secret,
            **callers_env,
        }
        tables = {table_id: table_names[variable] for table_id, variable in self.template.table_variables.items()}
        tables |= messages
        environments = {
            function: {**self.template.environment_of(function, tables), **local}
            for function in self.template.functions
        }
        # The Lambda Invoke API the functions reach (the sweep hands unfinished work on to itself through it).
        invoke_api = LocalLambdaApi(LocalLambda({}, {}))
        for environment in environments.values():
            environment["AWS_ENDPOINT_URL_LAMBDA"] = invoke_api.endpoint_url
        self._write_env_file(environments["AcquireLeaseFunction"])
        lambdas = LocalLambda(self.template.functions, environments)
        invoke_api.lambdas = lambdas
        self._cleanups.append(lambdas.stop)
        self._cleanups.append(invoke_api.server_close)
        self._cleanups.append(invoke_api.shutdown)
        threading.Thread(target=invoke_api.serve_forever, name="lambda-api", daemon=True).start()
        _progress(f"Lambda Invoke API (asynchronous self-invocation) on {invoke_api.endpoint_url}")
        for function in ("AuthorizerFunction", "AcquireLeaseFunction"):
            try:
                lambdas.pools[function].warm()
            except FunctionError as error:
                raise SystemExit(
                    f"[devstack] {function} refused to start: {error.payload.get('errorMessage')}"
                ) from error

        emulators: dict[str, TtlEmulator] = {}
        for table_id, definition in self.template.tables.items():
            ttl_spec = definition.get("TimeToLiveSpecification") or {}
            if ttl_spec.get("Enabled"):
                emulator = TtlEmulator(
                    client,
                    table_names[self.template.table_variables[table_id]],
                    self.template.hash_key(table_id),
                    ttl_spec["AttributeName"],
                    self.ttl_lag_seconds,
                )
                emulators[table_id] = emulator
                self._every(1.0, emulator.run_once, f"ttl:{table_id}")
        for mapping in self.template.stream_mappings:
            if mapping.table not in stream_arns:
                continue
            poller = StreamMapping(
                database.client("dynamodbstreams"),
                stream_arns[mapping.table],
                mapping,
                lambdas,
                emulators.get(mapping.table),
                self.state_dir / "stream-failures",
            )
            self._thread(poller.run, f"stream:{mapping.function}")
        for worker, name in messaging.workers(lambdas):
            self._thread(worker, name)
        for schedule in self.template.schedules:
            variable, _ = SCHEDULE_INTERVALS.get(schedule.function, ("", 60.0))
            interval = intervals.get(schedule.function, 60.0)
            _progress(f"schedule: {schedule.function} every {interval:g} s ({variable})")
            self._thread(Schedule(lambdas, schedule.function, interval).run, f"schedule:{schedule.function}")

        api = LocalHttpApi(("127.0.0.1", self.port), self.template, lambdas, principals)
        self._cleanups.append(api.server_close)
        self._cleanups.append(api.shutdown)
        threading.Thread(target=api.serve_forever, name="http-api", daemon=True).start()
        for route in self.template.routes:
            _progress(f"route {route.route_key:<32} → {route.function} ({route.auth})")

    def _callers(self) -> tuple[dict[str, str], dict[str, Principal]]:
        """AUTH_MODE's local part (devstack/auth.py): the bootstrap operator's token for the authorizer, or the
        IAM principals the gateway verifies (an operator made when none is named)."""
        mode = os.environ.get("AUTH_MODE", "").strip() or "secret"
        if mode == "token":
            token, note = bootstrap_token(os.environ, self.state_dir)
            if note:
                _progress(note)
            return {"BOOTSTRAP_TOKEN": token}, {}
        if mode == "iam":
            principals, variables, note = local_principals(os.environ, self.state_dir)
            os.environ.update(variables)  # OPERATOR_PRINCIPALS: a template parameter, read as the functions' value
            _progress(note)
            return {}, principals
        return {}, {}

    def _restore_tables(self, client: Any, tables: tuple[str, ...]) -> None:
        path = self.state_dir / "dynamodb" / "tables.json"
        snapshots = TableSnapshots(path, client, tables)
        if self.fresh:
            if path.exists():
                kept = path.with_name("tables.before-fresh.json")
                path.replace(kept)
                _progress(f"--fresh: starting with empty tables; the previous ones are kept in {kept}")
        else:
            restored = snapshots.restore()
            if restored:
                _progress(f"tables restored from {path}: {', '.join(f'{t} {n}' for t, n in restored.items())} items")
        _progress(
            f"tables persist in {path} (every {self.snapshot_seconds:g} s and on stop);"
            " `make run FRESH=1` (or DEVSTACK_FRESH=1) starts empty"
        )
        self._every(self.snapshot_seconds, snapshots.save, "snapshot")

        def last_snapshot() -> None:
            saved = snapshots.save()
            _progress(f"tables saved to {path} ({saved} items)")

        self._cleanups.append(last_snapshot)  # runs before the embedded DynamoDB stops (cleanups run newest first)

    def _every(self, seconds: float, action: Any, name: str) -> None:
        def loop() -> None:
            while not self._stop.wait(seconds):
                try:
                    action()
                except Exception:
                    log.exception("%s pass failed", name)

        self._thread(loop, name)

    def _thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(
            target=target, args=() if target.__name__ == "loop" else (self._stop,), name=name, daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def _write_env_file(self, environment: dict[str, str]) -> None:
        shown = {
            key: environment[key]
            for key in sorted(environment)
            if key.startswith(("AWS_", "DOCKER_", "PROVIDERS", "RENDERER_", "ANIM_", "POWERTOOLS_", "RUNPOD_API_URL"))
            or key.endswith("_TABLE")
        }
        path = self.state_dir / "functions.env.json"
        path.write_text(json.dumps({"Parameters": shown}, indent=2))

    def stop(self) -> None:
        """Stop every part, newest first."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                cleanup()
            except Exception:
                log.exception("cleanup failed")
        for note in self._on_stop:
            note()

    def wait(self) -> None:
        """Block until SIGINT or SIGTERM."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: self._stop.set())
        while not self._stop.wait(0.5):
            pass
