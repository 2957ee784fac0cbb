"""A task worker for ModuleX `llm` and `tool` nodes, built on `interlude.worker`.

`llm` nodes are answered by Amazon Bedrock's Converse API when INTERLUDE_WORKER_BEDROCK_MODEL names a model (AWS
credentials and region as boto3 finds them), and by a deterministic local echo otherwise. `tool` nodes: the
`send_email` tool records what it would send (one JSON line per message in the outbox file) and answers with it;
any other tool echoes its parameters.

    make dev                                   # in one terminal
    .venv/bin/python examples/worker/worker.py # in another: finds the stack through .interlude/local.json

INTERLUDE_URL and INTERLUDE_API_KEY (a key with the `tasks:work` scope) aim it at another deployment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlude.worker import NonRetryableError, TaskContext, Worker

BEDROCK_MODEL_ENV = "INTERLUDE_WORKER_BEDROCK_MODEL"
OUTBOX_ENV = "INTERLUDE_WORKER_OUTBOX"
DEFAULT_STATE_FILE = Path(".interlude/local.json")
DEFAULT_OUTBOX = Path(".interlude/worker-outbox.jsonl")
ECHO_PREFIX = "Echo draft: "
# Bedrock errors that another attempt will not mend: the request or the account is wrong, not the moment.
BEDROCK_FINAL_ERRORS = {"ValidationException", "AccessDeniedException", "ResourceNotFoundException"}

LlmFunction = Callable[[dict[str, Any], Any, TaskContext], str]


def prompts(config: dict[str, Any]) -> tuple[str, str]:
    """(system, user) of an `llm_config`, its `{{…}}` references already resolved by the server.
    `prompt_template` is ModuleX's deprecated spelling of `user_prompt`."""
    user = config.get("user_prompt") or config.get("prompt_template") or ""
    if not isinstance(user, str) or not user.strip():
        raise NonRetryableError("the llm node has no user_prompt")
    return str(config.get("system_prompt") or ""), user


def echo_llm(config: dict[str, Any], input: Any, context: TaskContext) -> str:
    """The same text for the same prompt, every time: what tests and a laptop without Bedrock get."""
    _, user = prompts(config)
    return ECHO_PREFIX + user


def converse_request(config: dict[str, Any], model_id: str) -> dict[str, Any]:
    """The Converse API request for an `llm_config` (`llm.temperature` and `max_tokens` when the node sets them)."""
    system, user = prompts(config)
    request: dict[str, Any] = {"modelId": model_id, "messages": [{"role": "user", "content": [{"text": user}]}]}
    if system:
        request["system"] = [{"text": system}]
    inference: dict[str, Any] = {}
    temperature = (config.get("llm") or {}).get("temperature")
    if isinstance(temperature, int | float):
        inference["temperature"] = float(temperature)
    if isinstance(config.get("max_tokens"), int):
        inference["maxTokens"] = config["max_tokens"]
    if inference:
        request["inferenceConfig"] = inference
    return request


def bedrock_llm(client: Any, model_id: str) -> LlmFunction:
    """An `llm` handler over a `bedrock-runtime` client: the reply's text blocks joined (the server stores a
    string result as the node's output, so `{{node_id}}` reads the text)."""
    from botocore.exceptions import ClientError

    def converse(config: dict[str, Any], input: Any, context: TaskContext) -> str:
        try:
            response = client.converse(**converse_request(config, model_id))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in BEDROCK_FINAL_ERRORS:
                raise NonRetryableError(str(exc)) from exc
            raise  # throttling, a model busy or a network failure: another attempt may do
        blocks = response["output"]["message"]["content"]
        return "".join(block["text"] for block in blocks if "text" in block)

    return converse


class Outbox:
    """What the `send_email` tool would send, one JSON line per message: a stand-in for SES or SMTP."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def record(self, message: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock, self.path.open("a") as out:
            out.write(json.dumps(message) + "\n")

    def messages(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]


def tool_parameters(config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(tool name, parameters) of a `tool_config`: defaults, then the node's `input_mapping`, then overrides."""
    tool = config.get("tool") or {}
    name = str(tool.get("service_name") or tool.get("integration_name") or "")
    if not name:
        raise NonRetryableError("the tool node names no tool (tool_config.tool.service_name)")
    parameters = {
        **(tool.get("parameter_defaults") or {}),
        **(config.get("input_mapping") or {}),
        **(tool.get("parameter_overrides") or {}),
    }
    return name, parameters


def tool_handler(outbox: Outbox) -> Callable[[dict[str, Any], Any, TaskContext], dict[str, Any]]:
    def run_tool(config: dict[str, Any], input: Any, context: TaskContext) -> dict[str, Any]:
        name, parameters = tool_parameters(config)
        if name != "send_email":
            return {"tool": name, "parameters": parameters}
        missing = [field for field in ("to", "body") if not parameters.get(field)]
        if missing:
            raise NonRetryableError(f"send_email needs {', '.join(missing)}")
        # One id per (run, node): a retried attempt records the same message again under the same id.
        message_id = hashlib.sha256(f"{context.run_id}/{context.node_id}".encode()).hexdigest()[:16]
        message = {
            "messageId": message_id,
            "runId": context.run_id,
            "to": parameters["to"],
            "subject": parameters.get("subject", ""),
            "body": parameters["body"],
        }
        outbox.record(message)
        return {"sent": True, **message}

    return run_tool


def build_worker(
    base_url: str,
    api_key: str,
    outbox: Outbox,
    *,
    bedrock_model: str | None = None,
    bedrock_client: Any = None,
    wait_seconds: int = 20,
) -> Worker:
    worker = Worker(base_url, api_key, wait_seconds=wait_seconds)
    if bedrock_model:
        if bedrock_client is None:
            import boto3

            bedrock_client = boto3.client("bedrock-runtime")
        worker.handler("llm")(bedrock_llm(bedrock_client, bedrock_model))
    else:
        worker.handler("llm")(echo_llm)
    worker.handler("tool")(tool_handler(outbox))
    return worker


def endpoint(state_file: Path) -> tuple[str, str]:
    """INTERLUDE_URL / INTERLUDE_API_KEY, else the local stack's state file (written by `make dev`)."""
    url, key = os.environ.get("INTERLUDE_URL"), os.environ.get("INTERLUDE_API_KEY")
    if not (url and key) and state_file.exists():
        saved = json.loads(state_file.read_text())
        url, key = url or saved.get("baseUrl"), key or saved.get("apiKey")
    if not (url and key):
        raise SystemExit("worker: set INTERLUDE_URL and INTERLUDE_API_KEY, or start the local stack (make dev)")
    return url, key


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--state-file", type=Path, default=DEFAULT_STATE_FILE, help="the local stack's state file")
    parser.add_argument("--outbox", type=Path, default=Path(os.environ.get(OUTBOX_ENV) or DEFAULT_OUTBOX))
    parser.add_argument("--wait-seconds", type=int, default=20, help="the claim's long poll (0..20)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    url, key = endpoint(args.state_file)
    model = os.environ.get(BEDROCK_MODEL_ENV)
    worker = build_worker(url, key, Outbox(args.outbox), bedrock_model=model, wait_seconds=args.wait_seconds)
    logging.getLogger("interlude.worker").info(
        "working for %s: llm by %s, tools recorded in %s", url, f"Bedrock {model}" if model else "echo", args.outbox
    )
    worker.run()


if __name__ == "__main__":
    main()
