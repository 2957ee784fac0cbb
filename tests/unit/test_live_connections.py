"""The management API's answers to a push, as the outbox's live handler reads them (adapters/live_connections.py)."""

from __future__ import annotations

import logging

import boto3
import pytest
from botocore.stub import Stubber

from interlude.adapters.live_connections import ApiGatewayConnections


@pytest.fixture
def stubbed():
    client = boto3.client("apigatewaymanagementapi", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
    with Stubber(client) as stub:
        yield ApiGatewayConnections("http://127.0.0.1:9", client), stub


def test_a_sent_message_and_a_gone_connection(stubbed):
    connections, stub = stubbed
    stub.add_response("post_to_connection", {}, {"ConnectionId": "c1=", "Data": b"x"})
    stub.add_client_error("post_to_connection", "GoneException", http_status_code=410)
    assert connections.send("c1=", b"x") is True
    assert connections.send("c2=", b"x") is False


@pytest.mark.parametrize(("code", "status"), [("LimitExceededException", 429), ("ForbiddenException", 403)])
def test_any_other_refusal_is_logged_and_holds_nothing_back(stubbed, caplog, code, status):
    connections, stub = stubbed
    stub.add_client_error("post_to_connection", code, http_status_code=status)
    with caplog.at_level(logging.ERROR, logger="interlude.adapters.live_connections"):
        # not raised: the outbox record (and the run's other work in it) goes on; the connection is not taken as gone
        assert connections.send("c1=", b"x") is True
    assert [r.connectionId for r in caplog.records] == ["c1="]
    assert code in caplog.records[0].error
