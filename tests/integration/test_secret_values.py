"""What a warm instance keeps of the secrets it reads (adapters/secret_values.py), on moto's Secrets Manager: a
missing secret read as None where its reader accepts one, how many secrets are kept, and the Slack readers keeping
theirs there (so a SnapStart restore forgets them with the key ring)."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from interlude.adapters import secret_values
from interlude.adapters.notify.slack_interactivity import SECRET_CACHE_S, SlackApp
from interlude.adapters.notify.slack_settings import slack_secret_name, slack_signing_secret_name
from interlude.adapters.secret_values import secret_value, secret_value_if_set
from interlude.config.notify import NotifySettings
from tests.integration.test_keyring_store import fetches as fetches  # noqa: F401, PLC0414 (the fixture)
from tests.integration.test_keyring_store import now as now  # noqa: F401, PLC0414 (the fixture)
from tests.integration.test_keyring_store import secretsmanager as secretsmanager  # noqa: F401, PLC0414 (the fixture)

MAX_AGE_S = 60.0


def test_a_missing_secret_is_none_for_its_max_age_and_read_again_after(secretsmanager, now, fetches) -> None:
    assert secret_value_if_set("slack/t1", MAX_AGE_S, client=secretsmanager) is None
    secretsmanager.create_secret(Name="slack/t1", SecretString="set")

    # Within the max age the absence is kept: no second read
    now[0] += MAX_AGE_S - 1
    assert secret_value_if_set("slack/t1", MAX_AGE_S, client=secretsmanager) is None
    assert fetches == ["slack/t1"]

    now[0] += 1
    assert secret_value_if_set("slack/t1", MAX_AGE_S, client=secretsmanager) == "set"
    assert fetches == ["slack/t1", "slack/t1"]


def test_a_kept_absence_does_not_answer_a_reader_that_needs_the_secret(secretsmanager, now) -> None:
    assert secret_value_if_set("ring", MAX_AGE_S, client=secretsmanager) is None
    with pytest.raises(ClientError) as missing:
        secret_value("ring", MAX_AGE_S, client=secretsmanager)
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_kept_secrets_are_bounded_and_the_least_recently_read_is_forgotten_first(
    secretsmanager, now, fetches, monkeypatch
) -> None:
    monkeypatch.setattr(secret_values, "MAX_KEPT", 2)
    for name in ("a", "b", "c"):
        secretsmanager.create_secret(Name=name, SecretString=name)
    secret_value("a", MAX_AGE_S, client=secretsmanager)
    secret_value_if_set("b", MAX_AGE_S, client=secretsmanager)
    secret_value("a", MAX_AGE_S, client=secretsmanager)
    secret_value("c", MAX_AGE_S, client=secretsmanager)
    assert fetches == ["a", "b", "c"]
    assert list(secret_values._kept()) == ["a", "c"]

    # b, read least recently, was forgotten: it is read again, and a stays kept
    fetches.clear()
    secret_value_if_set("b", MAX_AGE_S, client=secretsmanager)
    secret_value("c", MAX_AGE_S, client=secretsmanager)
    assert fetches == ["b"]


def test_the_slack_apps_secrets_are_kept_for_a_minute_and_forgotten_by_a_restore(secretsmanager, now, fetches) -> None:
    settings = NotifySettings.from_env()
    slack = SlackApp(secretsmanager, settings)
    signing = slack_signing_secret_name("t1", settings.slack_signing_secret_prefix)
    bot = slack_secret_name("t1", settings.slack_secret_prefix)
    secretsmanager.create_secret(Name=signing, SecretString=json.dumps({"signingSecret": "first"}))

    assert (slack.signing_secret("t1"), slack.bot_token("t1")) == ("first", None)
    secretsmanager.put_secret_value(SecretId=signing, SecretString=json.dumps({"signingSecret": "second"}))
    secretsmanager.create_secret(Name=bot, SecretString=json.dumps({"botToken": "xoxb-1"}))
    now[0] += SECRET_CACHE_S - 1
    assert (slack.signing_secret("t1"), slack.bot_token("t1")) == ("first", None)
    assert fetches == [signing, bot]

    # A SnapStart restore forgets what the snapshotted instance read (api/snapstart.py), the Slack secrets with it
    secret_values.forget()
    assert (slack.signing_secret("t1"), slack.bot_token("t1")) == ("second", "xoxb-1")
