"""The functions' DynamoDB client leaves the check of a request against the service's model to DynamoDB (ADR 0124);
the suite turns botocore's check back on, so a malformed request the store builds still fails a test under moto."""

from __future__ import annotations

import pytest
from botocore.exceptions import ParamValidationError

from interlude import config
from interlude.config.runtime import VALIDATE_REQUESTS_ENV
from interlude.store.table import Table


class Sent(Exception):
    """Raised where the client would put the request on the wire."""


def sent_or_refused(client: object) -> str:
    def stop(**_: object) -> None:
        raise Sent

    client.meta.events.register_first("before-send.dynamodb", stop)  # type: ignore[attr-defined]
    try:
        client.put_item(TableName="t", Item={"pk": {"S": 5}})  # type: ignore[attr-defined]
    except ParamValidationError:
        return "refused by botocore"
    except Sent:
        return "sent"
    raise AssertionError("neither sent nor refused")


@pytest.fixture
def settings_forgotten():
    config.forget()
    yield
    config.forget()


def test_the_functions_client_sends_a_request_botocore_would_refuse_and_the_suites_refuses_it(
    monkeypatch, settings_forgotten
):
    monkeypatch.delenv(VALIDATE_REQUESTS_ENV)
    assert sent_or_refused(Table("t", "e").client) == "sent"  # DynamoDB refuses it on arrival (a ValidationException)
    monkeypatch.setenv(VALIDATE_REQUESTS_ENV, "1")
    config.forget()
    assert sent_or_refused(Table("t", "e").client) == "refused by botocore"
