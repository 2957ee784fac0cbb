"""The four task routes a worker calls (`POST /tasks:claim`, `/tasks/{taskToken}/complete|fail|heartbeat`), over
urllib3, with each answer sorted into what the worker loop does next."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

import urllib3

# The claim's long poll is held by the server; the read timeout leaves it this much room on top.
READ_MARGIN_S = 10.0
CONNECT_TIMEOUT_S = 5.0
# Completing, failing or heartbeating answers at once; a slower answer is a transport failure.
CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Task:
    """One claimed task, as `POST /tasks:claim` answers it."""

    token: str
    run_id: str
    node_id: str
    node_type: str
    config: dict[str, Any]
    input: Any
    attempt: int
    heartbeat_timeout_s: float
    queue: str | None = None
    timeout_s: float | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Task:
        return cls(
            token=str(body["taskToken"]),
            run_id=str(body["runId"]),
            node_id=str(body["nodeId"]),
            node_type=str(body["nodeType"]),
            config=dict(body.get("config") or {}),
            input=body.get("input"),
            attempt=int(body.get("attempt", 1)),
            heartbeat_timeout_s=float(body.get("heartbeatTimeoutSeconds") or 0),
            queue=body.get("queue"),
            timeout_s=float(body["timeoutSeconds"]) if body.get("timeoutSeconds") else None,
        )


class TransportError(Exception):
    """The server could not be reached or answered 5xx/429: worth trying again after a pause."""


class Refused(Exception):
    """The server refused the call (4xx): trying the same call again would be refused the same way."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


# A task that is no longer this worker's to finish: completed by someone else, timed out, or its run is gone.
TASK_GONE = frozenset({404, 409, 410})


class TaskClient:
    def __init__(self, base_url: str, api_key: str, *, pool: urllib3.PoolManager | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "interlude-worker",
        }
        self.pool = pool or urllib3.PoolManager(retries=False)

    def claim(self, queues: list[str], wait_s: int) -> Task | None:
        """A task from one of `queues`, or None once the server's long poll of `wait_s` (0..20) seconds found none."""
        status, body = self.call("POST", "/tasks:claim", {"queues": queues, "waitSeconds": wait_s}, wait_s)
        if status == 204 or not body:
            return None
        return Task.of(body)

    def complete(self, token: str, output: Any) -> None:
        self.call("POST", f"/tasks/{quote(token)}/complete", {"output": output})

    def fail(self, token: str, error: dict[str, Any], retryable: bool) -> None:
        self.call("POST", f"/tasks/{quote(token)}/fail", {"error": error, "retryable": retryable})

    def heartbeat(self, token: str) -> None:
        self.call("POST", f"/tasks/{quote(token)}/heartbeat", {})

    def call(self, method: str, path: str, body: Any, hold_s: float = 0.0) -> tuple[int, Any]:
        timeout = urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=max(CALL_TIMEOUT_S, hold_s + READ_MARGIN_S))
        try:
            response = self.pool.request(
                method, self.base_url + path, body=json.dumps(body, allow_nan=False).encode(), headers=self.headers, timeout=timeout
            )
        except urllib3.exceptions.HTTPError as exc:
            raise TransportError(f"{method} {path}: {exc}") from exc
        if response.status == 429 or response.status >= 500:
            raise TransportError(f"{method} {path}: {response.status} {refusal(response.data)[1]}")
        if response.status >= 400:
            raise Refused(response.status, *refusal(response.data))
        return response.status, json.loads(response.data) if response.data else None

    def close(self) -> None:
        self.pool.clear()


def quote(token: str) -> str:
    return urllib.parse.quote(token, safe="")


def refusal(raw: bytes) -> tuple[str, str]:
    """(code, message) of an OpenWOP error envelope `{error, message}`; the raw text when the body is not one."""
    try:
        body = json.loads(raw)
    except ValueError:
        return "", raw.decode(errors="replace")[:200]
    if isinstance(body, dict):
        return str(body.get("error", "")), str(body.get("message", body.get("detail", "")))
    return "", str(body)[:200]
