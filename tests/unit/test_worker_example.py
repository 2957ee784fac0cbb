"""examples/worker: the echo, the Converse request and reply (botocore's Stubber, nothing leaves the process), the
send_email tool's record, and where the worker finds its stack."""

from __future__ import annotations

import json
import threading

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from examples.worker import worker as example
from interlude.worker import NonRetryableError, Task, TaskContext

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
LLM_CONFIG = {
    "llm": {"integration_name": "modulexai", "model_id": "claude-haiku-4.5", "temperature": 0.2},
    "system_prompt": "Draft a short customer email.",
    "user_prompt": "Write a reply to: the refund",
}


def context(node_id: str = "node_draft") -> TaskContext:
    task = Task("tt1.x.y", "demo/run-1", node_id, "llm", {}, {}, 1, 60)
    return TaskContext(task, threading.Event(), threading.Event())


def bedrock():
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
    )
    return client, Stubber(client)


def test_the_echo_answers_the_same_prompt_with_the_same_text():
    assert example.echo_llm(LLM_CONFIG, {}, context()) == "Echo draft: Write a reply to: the refund"
    with pytest.raises(NonRetryableError, match="user_prompt"):
        example.echo_llm({"system_prompt": "only this"}, {}, context())


def test_an_llm_node_becomes_one_converse_call_and_its_reply_text_the_output():
    client, stub = bedrock()
    reply = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Dear customer, "}, {"text": "refunded."}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 20, "outputTokens": 5, "totalTokens": 25},
        "metrics": {"latencyMs": 10},
    }
    stub.add_response(
        "converse",
        reply,
        {
            "modelId": MODEL,
            "messages": [{"role": "user", "content": [{"text": "Write a reply to: the refund"}]}],
            "system": [{"text": "Draft a short customer email."}],
            "inferenceConfig": {"temperature": 0.2},
        },
    )
    with stub:
        assert example.bedrock_llm(client, MODEL)(LLM_CONFIG, {}, context()) == "Dear customer, refunded."
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(("code", "final"), [("ValidationException", True), ("ThrottlingException", False)])
def test_a_bedrock_refusal_fails_for_good_and_throttling_tries_again(code, final):
    client, stub = bedrock()
    stub.add_client_error("converse", service_error_code=code, service_message="no", http_status_code=400)
    with stub:
        raised = NonRetryableError if final else ClientError
        with pytest.raises(raised):
            example.bedrock_llm(client, MODEL)(LLM_CONFIG, {}, context())


def test_send_email_records_the_message_and_answers_with_it(tmp_path):
    outbox = example.Outbox(tmp_path / "outbox.jsonl")
    send = example.tool_handler(outbox)
    config = {
        "tool": {"service_name": "send_email", "parameter_defaults": {"subject": "About your request"}},
        "input_mapping": {"to": "ana@example.com", "body": "Echo draft: hi"},
    }

    sent = send(config, {}, context("node_send"))

    assert outbox.messages() == [{k: v for k, v in sent.items() if k != "sent"}]
    assert sent["sent"] is True
    assert (sent["to"], sent["subject"], sent["body"]) == ("ana@example.com", "About your request", "Echo draft: hi")
    assert send(config, {}, context("node_send"))["messageId"] == sent["messageId"]  # a retry, the same message id
    with pytest.raises(NonRetryableError, match="body"):
        send({"tool": {"service_name": "send_email"}, "input_mapping": {"to": "a@b.c"}}, {}, context())
    assert send({"tool": {"service_name": "lookup"}, "input_mapping": {"q": 1}}, {}, context()) == {
        "tool": "lookup",
        "parameters": {"q": 1},
    }


def test_the_worker_finds_the_local_stack_unless_told_otherwise(tmp_path, monkeypatch):
    state = tmp_path / "local.json"
    state.write_text(json.dumps({"baseUrl": "http://127.0.0.1:8080", "apiKey": "ik_local"}))
    monkeypatch.delenv("INTERLUDE_URL", raising=False)
    monkeypatch.delenv("INTERLUDE_API_KEY", raising=False)
    assert example.endpoint(state) == ("http://127.0.0.1:8080", "ik_local")
    monkeypatch.setenv("INTERLUDE_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("INTERLUDE_API_KEY", "ik_other")
    assert example.endpoint(state) == ("http://127.0.0.1:9000", "ik_other")
    monkeypatch.delenv("INTERLUDE_URL")
    with pytest.raises(SystemExit, match="make dev"):
        example.endpoint(tmp_path / "none.json")
