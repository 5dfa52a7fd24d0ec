"""Local Lambda service: a pool of execution environments (processes) per function, as Lambda scales."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time
import uuid
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from devstack.lambda_environment import serve
from devstack.template import REPO, FunctionSpec

LAYER_PATH = REPO / "layers" / "scheduler"
_spawn = multiprocessing.get_context("spawn")


class FunctionError(Exception):
    """The function raised, failed to initialise, or ran past its timeout."""

    def __init__(self, kind: str, payload: dict[str, Any]) -> None:
        super().__init__(f"{kind}: {payload.get('errorType')}: {payload.get('errorMessage')}")
        self.kind = kind
        self.payload = payload


@dataclass
class _Environment:
    process: BaseProcess
    connection: Connection


class FunctionPool:
    """Warm environments of one function; a new one starts (a cold start) when all are busy."""

    def __init__(self, spec: FunctionSpec, environment: dict[str, str], max_environments: int = 16) -> None:
        """`environment`: every variable the function gets (what the template gives it, resolved locally)."""
        self.spec = spec
        self._environment = environment
        self._max = max_environments
        self._idle: list[_Environment] = []
        self._count = 0
        self._changed = threading.Condition()
        self.cold_starts = 0

    def invoke(self, event: dict[str, Any], request_id: str | None = None) -> Any:
        """Run one invocation; raises FunctionError on a function error, init error or timeout."""
        environment = self._checkout()
        deadline = time.time() + self.spec.timeout
        try:
            environment.connection.send((event, request_id or str(uuid.uuid4()), int(deadline * 1000)))
            if not environment.connection.poll(self.spec.timeout):
                self._discard(environment)
                raise FunctionError("timeout", {"errorType": "Timeout", "errorMessage": f"{self.spec.timeout} s"})
            status, payload = environment.connection.recv()
        except (EOFError, OSError, BrokenPipeError) as error:
            self._discard(environment)
            raise FunctionError("crash", {"errorType": "Runtime.ExitError", "errorMessage": str(error)}) from error
        self._checkin(environment)
        if status != "ok":
            raise FunctionError(status, payload)
        return payload

    def warm(self) -> None:
        """Start one environment now, so an init error shows at start-up rather than on a request."""
        self._checkin(self._checkout())

    def stop(self) -> None:
        """End every idle environment (busy ones end when their invocation returns)."""
        with self._changed:
            idle, self._idle = self._idle, []
            self._max = 0
        for environment in idle:
            self._end(environment)

    def _checkout(self) -> _Environment:
        with self._changed:
            while not self._idle and self._count >= self._max:
                if self._max == 0:
                    raise FunctionError("stopped", {"errorType": "Stopped", "errorMessage": "shutting down"})
                self._changed.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return self._start()
        except BaseException:
            with self._changed:
                self._count -= 1
                self._changed.notify()
            raise

    def _checkin(self, environment: _Environment) -> None:
        with self._changed:
            if self._max == 0:
                self._count -= 1
                self._end(environment)
            else:
                self._idle.append(environment)
            self._changed.notify()

    def _discard(self, environment: _Environment) -> None:
        self._end(environment)
        with self._changed:
            self._count -= 1
            self._changed.notify()

    def _start(self) -> _Environment:
        parent, child = _spawn.Pipe()
        spec = {
            "logical_id": self.spec.logical_id,
            "code_dir": str(self.spec.code_dir),
            "module": self.spec.module,
            "handler": self.spec.handler,
            "memory_mb": self.spec.memory_mb,
            "extra_paths": [str(LAYER_PATH)] if self.spec.uses_layer else [],
            "environment": {
                **self._environment,
                "AWS_LAMBDA_FUNCTION_NAME": self.spec.logical_id,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.spec.memory_mb),
            },
        }
        process = _spawn.Process(target=serve, args=(child, spec), name=self.spec.logical_id, daemon=True)
        process.start()
        child.close()
        self.cold_starts += 1
        if not parent.poll(max(30, self.spec.timeout)):
            process.kill()
            raise FunctionError("init_error", {"errorType": "Timeout", "errorMessage": "init did not finish"})
        status, payload = parent.recv()
        if status != "ready":
            process.join(5)
            raise FunctionError(status, payload)
        return _Environment(process, parent)

    @staticmethod
    def _end(environment: _Environment) -> None:
        with contextlib.suppress(OSError):
            environment.connection.send(None)
        environment.process.join(2)
        if environment.process.is_alive():
            environment.process.kill()
            environment.process.join(2)


class LocalLambda:
    """Every function of the template, invocable by logical id, each with its own environment."""

    def __init__(self, functions: dict[str, FunctionSpec], environments: dict[str, dict[str, str]]) -> None:
        self.pools = {name: FunctionPool(spec, environments[name]) for name, spec in functions.items()}

    def invoke(self, function: str, event: dict[str, Any], request_id: str | None = None) -> Any:
        """Invoke a function synchronously (RequestResponse)."""
        return self.pools[function].invoke(event, request_id)

    def stop(self) -> None:
        """Stop every environment."""
        for pool in self.pools.values():
            pool.stop()
