"""The local stack's Lambda Invoke API, for the operator surface alone: a loopback server answering
`POST /2015-03-31/functions/interlude-admin/invocations` as AWS Lambda does, so `interlude tenants --local` invokes the
`admin` function with boto3's own Lambda client exactly as `--stack NAME` does a deployed one. It runs the real handler
in the stack's process (the stack's environment). It is not the API gateway: no tenant key reaches it there either.
"""

from __future__ import annotations

import json
import traceback
from http.server import ThreadingHTTPServer

from interlude import wiring
from interlude.local.http_gateway import LOOPBACK, JsonHandler, LoopbackServer
from interlude.local.lambda_runtime import FUNCTION_NAME_PREFIX, invoke

INVOKE_PATH = f"/2015-03-31/functions/{FUNCTION_NAME_PREFIX}{wiring.OPERATOR_FUNCTION}/invocations"
MAX_PAYLOAD = 6 * 1024 * 1024


class _Handler(JsonHandler):
    server_version = "interlude-local-lambda"

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(min(length, MAX_PAYLOAD))
        if self.path.split("?", 1)[0] != INVOKE_PATH:
            self.answer(404, {"Type": "User", "message": "Function not found"}, {"x-amzn-ErrorType": "ResourceNotFoundException"})
            return
        try:
            result = invoke(wiring.OPERATOR_FUNCTION, json.loads(raw or b"{}"))
            headers: dict[str, str] = {}
        except Exception as exc:  # what Lambda answers for a function that raised
            result = {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": traceback.format_exc().splitlines()}
            headers = {"X-Amz-Function-Error": "Unhandled"}
        self.answer(200, result, headers)


class LambdaApi(LoopbackServer):
    def __init__(self, port: int = 0) -> None:
        super().__init__(ThreadingHTTPServer((LOOPBACK, port), _Handler), "lambda-api")
