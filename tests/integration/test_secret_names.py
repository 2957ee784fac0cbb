"""Tenants whose ids differ only by '~' and '_' (issue 26, S4) on moto's Secrets Manager: each gets its own callback
signing secret, and every secret this host creates for them has a name AWS accepts (moto accepts any name, so the
pattern of AWS's CreateSecret reference is asserted here)."""

from __future__ import annotations

import re

import boto3
import pytest
from moto import mock_aws

from interlude import wiring
from interlude.adapters.delivery.signing import SecretCache
from interlude.adapters.notify.slack_settings import store_slack
from interlude.adapters.subscription_secrets import SubscriptionSecrets
from interlude.domain.ids import mint_opaque

AWS_SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
TENANTS = ("x~y", "x_y")


# A world of its own: a test lists every secret of the account.
@pytest.fixture
def secretsmanager(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield boto3.client("secretsmanager")


def test_tenants_x_tilde_y_and_x_underscore_y_sign_with_their_own_secrets(secretsmanager):
    cache = SecretCache(secretsmanager, wiring.SECRET_PREFIXES["WEBHOOK_SECRET_PREFIX"])
    first, second = (cache.signing_secrets(tenant) for tenant in TENANTS)
    assert first != second
    # And each stays its own when read again (by another worker: no cache)
    again = SecretCache(secretsmanager, wiring.SECRET_PREFIXES["WEBHOOK_SECRET_PREFIX"])
    assert [again.signing_secrets(tenant) for tenant in TENANTS] == [first, second]


def test_every_secret_made_for_such_tenants_has_a_name_aws_accepts(secretsmanager):
    subscriptions = SubscriptionSecrets(secretsmanager, wiring.SECRET_PREFIXES["SUBSCRIPTION_SECRET_PREFIX"])
    for tenant in TENANTS:
        SecretCache(secretsmanager, wiring.SECRET_PREFIXES["WEBHOOK_SECRET_PREFIX"]).signing_secrets(tenant)
        store_slack(tenant, {"webhookUrl": "https://hooks.slack.com/services/T/B/x"}, client=secretsmanager)
        subscriptions.create(subscriptions.name(f"{tenant}/{mint_opaque()}"), {"current": "s", "previous": []})
    names = [s["Name"] for s in secretsmanager.list_secrets(MaxResults=100)["SecretList"]]
    assert len(names) == 3 * len(TENANTS)
    for name in names:
        assert AWS_SECRET_NAME.fullmatch(name), name
