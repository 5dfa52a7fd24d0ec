"""Structured JSON log lines on the standard library's `logging`, shaped as powertools' Logger writes them.

Why our own code and not powertools' Logger (a well-kept library, which we would otherwise use): importing
it runs `aws_lambda_powertools/__init__.py`, which loads Metrics, Tracer and the boto3 user-agent hook
with it, about 40 modules no function of ours needs. In the deployed layout that import alone executed
3.4 % of the boto3 floor's instructions (bench/cold_start.py), where a read function's whole budget is 12 %;
this module adds nothing measurable (`logging` is loaded by botocore already).
What powertools still does for us, it does where it is needed: Idempotency (acquire only) and
Parameters (secrets, loaded when first read).

The subset the functions use, with powertools' behaviour and names: `Logger()` (the function's) and
`Logger(child=True)` (a module's, named `<service>.<module>`, sharing the function's keys);
`inject_lambda_context(clear_state=True)`; `append_keys`; `debug/info/warning/error/exception(msg,
extra=...)`. A line holds level, location, message, timestamp, service, cold_start and the function's
name, memory size, ARN and request id, then the appended keys, then `extra`, then the exception (its
traceback text and frames) and the X-Ray trace id. Level: POWERTOOLS_LOG_LEVEL or LOG_LEVEL (INFO);
service: POWERTOOLS_SERVICE_NAME. Records still propagate to the root logger (pytest's caplog reads
them there); every other root handler (Lambda's runtime installs one) is told to drop them, so that
no line is written twice.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import IO, Any, TypeVar

Handler = TypeVar("Handler", bound=Callable[..., Any])

_UNDEFINED_SERVICE = "service_undefined"
# Where powertools puts each part of a line (a key re-added later keeps its place, as in a dict).
_FIRST = ("level", "location", "message", "timestamp")
# LogRecord attributes that are no `extra` key: the standard ones and what formatting adds.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_cold_start = True


def _level() -> str:
    return (os.environ.get("POWERTOOLS_LOG_LEVEL") or os.environ.get("LOG_LEVEL") or "INFO").upper()


class _Keys:
    """The keys every line of one service carries, shared by its function logger and its child loggers.

    Replaced, never changed in place: a thread formatting a line (the sweep's pool) reads one whole
    version while another appends; appends are serialised, so that two at once both land.
    """

    def __init__(self, service: str) -> None:
        self.service = service
        self.current: dict[str, Any] = {"service": service}
        self.handler: logging.Handler | None = None
        self._lock = threading.Lock()

    def append(self, keys: Mapping[str, Any]) -> None:
        with self._lock:
            self.current = {**self.current, **keys}

    def reset(self, keys: Mapping[str, Any]) -> None:
        with self._lock:
            self.current = {"service": self.service, **keys}


_SERVICES: dict[str, _Keys] = {}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, in powertools' key order; keys whose value is None are left out."""

    def __init__(self, keys: _Keys) -> None:
        super().__init__()
        self.keys = keys

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = dict.fromkeys(_FIRST)
        line["level"] = record.levelname
        line["location"] = f"{record.funcName}:{record.lineno}"
        line["timestamp"] = self.formatTime(record)
        line.update(self.keys.current)
        line.update((key, value) for key, value in vars(record).items() if key not in _RECORD_ATTRIBUTES)
        line["message"] = _message(record)
        exc_info = record.exc_info
        if isinstance(exc_info, tuple) and exc_info[0] is not None and exc_info[1] is not None:
            error = exc_info[1]
            line.setdefault("exception", self.formatException(exc_info))
            line.setdefault("exception_name", exc_info[0].__name__)
            line.setdefault("exception_notes", getattr(error, "__notes__", None))
            line["stack_trace"] = {
                "type": exc_info[0].__name__,
                "value": error,
                "module": type(error).__module__,
                "frames": [
                    {"file": frame.filename, "line": frame.lineno, "function": frame.name, "statement": frame.line}
                    for frame in traceback.extract_tb(exc_info[2])
                ],
            }
        trace = os.environ.get("_X_AMZN_TRACE_ID")
        line["xray_trace_id"] = trace.split(";")[0].replace("Root=", "") if trace else None
        shown = {key: value for key, value in line.items() if value is not None}
        return json.dumps(shown, default=str, separators=(",", ":"), ensure_ascii=False)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """`2026-11-30 21:03:30,123+0000`: local time (UTC in Lambda), milliseconds, offset."""
        return time.strftime(f"%Y-%m-%d %H:%M:%S,{int(record.msecs):03d}%z", time.localtime(record.created))


def _message(record: logging.LogRecord) -> Any:
    """The message as powertools shows it: a dict as is, a JSON text as what it encodes, else the text."""
    if isinstance(record.msg, dict):
        return record.msg
    if record.args:
        return record.getMessage()
    if isinstance(record.msg, str):
        try:
            return json.loads(record.msg)
        except (ValueError, TypeError):
            return record.msg
    return record.msg


class _DropService(logging.Filter):
    """On the root's other handlers: drop the service's records, which its own handler writes."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.prefix = service + "."
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == self.service or record.name.startswith(self.prefix))


def _configure(keys: _Keys, logger: logging.Logger, stream: IO[str]) -> None:
    """The service's one handler (JSON lines), and the root's other handlers told to leave its records."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(keys))
    logger.addHandler(handler)
    keys.handler = handler
    for other in logging.root.handlers:
        # pytest's caplog handler keeps them: tests read the records there.
        if type(other).__name__ != "LogCaptureHandler":
            other.addFilter(_DropService(keys.service))


class Logger:
    """A function's logger (`Logger()`, writing to `stream`, stdout by default), or a module's
    (`Logger(child=True)`) that writes through it."""

    def __init__(self, service: str | None = None, *, child: bool = False, stream: IO[str] | None = None) -> None:
        self.service = service or os.environ.get("POWERTOOLS_SERVICE_NAME") or _UNDEFINED_SERVICE
        self.child = child
        self._keys = _SERVICES.setdefault(self.service, _Keys(self.service))
        name = f"{self.service}.{sys._getframe(1).f_globals['__name__']}" if child else self.service
        self._logger = logging.getLogger(name)
        self._logger.setLevel(_level())
        if not child and self._keys.handler is None:
            _configure(self._keys, self._logger, stream or sys.stdout)

    @property
    def name(self) -> str:
        return self._logger.name

    def append_keys(self, **keys: Any) -> None:
        """Keys on every following line of this service (until the next invocation clears them)."""
        self._keys.append(keys)

    def get_current_keys(self) -> dict[str, Any]:
        return dict(self._keys.current)

    def inject_lambda_context(
        self, handler: Handler | None = None, *, clear_state: bool = False, log_event: bool = False
    ) -> Any:
        """Decorate a handler: each invocation's lines carry cold_start and the function's name, memory
        size, ARN and request id (`clear_state`: and none of the keys the previous invocation appended)."""
        if handler is None:
            return functools.partial(self.inject_lambda_context, clear_state=clear_state, log_event=log_event)

        @functools.wraps(handler)
        def invoke(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
            invocation = {
                "cold_start": _is_cold_start(),
                "function_name": context.function_name,
                "function_memory_size": context.memory_limit_in_mb,
                "function_arn": context.invoked_function_arn,
                "function_request_id": context.aws_request_id,
            }
            if clear_state:
                self._keys.reset(invocation)
            else:
                self._keys.append(invocation)
            if log_event:
                self._logger.info(event, stacklevel=2)
            return handler(event, context, *args, **kwargs)

        return invoke

    def debug(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None:
        self._logger.debug(msg, *args, extra=extra, stacklevel=2)

    def info(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None:
        self._logger.info(msg, *args, extra=extra, stacklevel=2)

    def warning(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None:
        self._logger.warning(msg, *args, extra=extra, stacklevel=2)

    def error(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None:
        self._logger.error(msg, *args, extra=extra, stacklevel=2)

    def exception(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None:
        """An ERROR line with the exception being handled (its traceback text and frames)."""
        self._logger.exception(msg, *args, extra=extra, stacklevel=2)


def _is_cold_start() -> bool:
    """True on this execution environment's first invocation (never under provisioned concurrency, whose
    init ran long before)."""
    global _cold_start
    first, _cold_start = _cold_start, False
    return first and os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") != "provisioned-concurrency"
