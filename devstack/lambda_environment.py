"""One Lambda execution environment: a process that imports one function's handler and serves invocations.

Like Lambda, it runs one invocation at a time, keeps module state between invocations (warm), and
writes the function's stdout/stderr (logs, EMF documents) straight to the console, prefixed with
the function's name so an operator sees each function's output as `sam local` shows it.
"""

from __future__ import annotations

import importlib
import io
import os
import sys
import time
import traceback
import uuid
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TextIO

# What Lambda's Python runtime sets in every execution environment (a subset; AWS_LAMBDA_FUNCTION_NAME and
# the memory size come with each function's spec).
RUNTIME_VARIABLES = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "TZ": ":UTC",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
}


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that handlers and powertools read."""

    function_name: str
    memory_limit_in_mb: int
    aws_request_id: str
    deadline_epoch_ms: int
    function_version: str = "$LATEST"
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_epoch_ms - int(time.time() * 1000))


class _PrefixedStream(io.TextIOBase):
    """Writes whole lines to the console, each prefixed with the function's name."""

    def __init__(self, target: TextIO, prefix: str) -> None:
        self._target = target
        self._prefix = prefix
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        if lines:
            self._target.write("".join(f"{self._prefix}{line}\n" for line in lines))
            self._target.flush()
        return len(text)

    def flush(self) -> None:
        self._target.flush()


def serve(connection: Connection, spec: dict[str, Any]) -> None:
    """Import the handler (the init phase), then answer invocations until told to stop."""
    prefix = f"[{spec['logical_id']}] "
    sys.stdout = _PrefixedStream(sys.__stdout__ or sys.stdout, prefix)
    sys.stderr = _PrefixedStream(sys.__stderr__ or sys.stderr, prefix)
    # Only what Lambda itself sets and what the function is given: nothing of the shell that started us.
    os.environ.clear()
    os.environ.update({**RUNTIME_VARIABLES, **spec["environment"]})
    sys.path[:0] = [spec["code_dir"], *spec["extra_paths"]]
    try:
        module = importlib.import_module(spec["module"])
        handler = getattr(module, spec["handler"])
    except BaseException as error:  # noqa: BLE001 - an init failure is reported, as Lambda reports it
        traceback.print_exc()
        connection.send(("init_error", {"errorType": type(error).__name__, "errorMessage": str(error)}))
        return
    connection.send(("ready", None))
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        event, request_id, deadline_ms = message
        # As Lambda does with active tracing: each invocation runs under its own X-Ray trace id.
        os.environ["_X_AMZN_TRACE_ID"] = (
            f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=1"
        )
        context = LambdaContext(
            function_name=spec["logical_id"],
            memory_limit_in_mb=spec["memory_mb"],
            aws_request_id=request_id or str(uuid.uuid4()),
            deadline_epoch_ms=deadline_ms,
        )
        try:
            result = handler(event, context)
        except Exception as error:  # noqa: BLE001 - a handler error is a function error, as in Lambda
            traceback.print_exc()
            connection.send(("error", {"errorType": type(error).__name__, "errorMessage": str(error)}))
            continue
        sys.stdout.flush()
        connection.send(("ok", result))
