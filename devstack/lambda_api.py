"""The Lambda service's Invoke API on loopback, so a function can invoke another (or itself) as in AWS.

`POST /2015-03-31/functions/{name}/invocations`, the call boto3's `lambda.invoke` makes: with
`X-Amz-Invocation-Type: Event` it answers 202 at once and runs the invocation in the background (as
Lambda's asynchronous queue does); otherwise it runs it and answers with the function's result.
Functions are named by their logical id, which is their AWS_LAMBDA_FUNCTION_NAME locally.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devstack.lambdas import FunctionError, LocalLambda

log = logging.getLogger("devstack.lambda_api")
_INVOKE = re.compile(r"/2015-03-31/functions/([^/]+)/invocations")  # matched whole: no `$` (a final newline)


class LocalLambdaApi(ThreadingHTTPServer):
    """Serves Invoke for every function of `lambdas`; `endpoint_url` is its AWS_ENDPOINT_URL_LAMBDA."""

    daemon_threads = True

    def __init__(self, lambdas: LocalLambda) -> None:
        self.lambdas = lambdas
        self.async_invocations = 0
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def invoke_later(self, function: str, event: Any) -> None:
        self.async_invocations += 1

        def run() -> None:
            try:
                self.lambdas.invoke(function, event)
            except FunctionError as error:
                log.error("asynchronous invocation of %s failed: %s", function, error)

        threading.Thread(target=run, name=f"async:{function}", daemon=True).start()


class _Handler(BaseHTTPRequestHandler):
    server: LocalLambdaApi
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        matched = _INVOKE.fullmatch(self.path.split("?", 1)[0])
        name = matched[1].rsplit(":", 1)[-1] if matched else ""  # a full ARN ends with the name
        if name not in self.server.lambdas.pools:
            self._answer(404, {"Type": "User", "Message": f"Function not found: {name}"}, "ResourceNotFoundException")
            return
        try:
            event = json.loads(body or b"{}")
        except ValueError:
            self._answer(
                400,
                {"Type": "User", "Message": "Could not parse request body into json"},
                "InvalidRequestContentException",
            )
            return
        if self.headers.get("X-Amz-Invocation-Type") == "Event":
            self.server.invoke_later(name, event)
            self._answer(202, None)
            return
        try:
            result = self.server.lambdas.invoke(name, event)
        except FunctionError as error:
            self._answer(200, error.payload, function_error="Unhandled")
            return
        self._answer(200, result)

    def _answer(
        self, status: int, document: Any, error_type: str | None = None, function_error: str | None = None
    ) -> None:
        payload = b"" if document is None else json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if error_type:
            self.send_header("x-amzn-ErrorType", error_type)
        if function_error:
            self.send_header("X-Amz-Function-Error", function_error)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
