"""Secrets Manager names made from tenant ids (issue 26, S4): distinct tenants never share a secret, and every
name Secrets Manager is asked to create or read is one it accepts (moto accepts any name: the pattern is asserted
here, from AWS's CreateSecret reference: 1-512 of ASCII letters, digits and /_+=.@-)."""

from __future__ import annotations

import itertools
import re

import pytest

from interlude import wiring
from interlude.adapters.delivery.signing import secret_name as callback_secret_name
from interlude.adapters.notify.slack_settings import slack_secret_name
from interlude.adapters.subscription_secrets import SubscriptionSecrets
from interlude.domain.ids import mint_opaque, secret_name

AWS_SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
# Every character a tenant id may hold, and tenants that differ only where '~', '_', '.' and '-' stand.
TENANT_ALPHABET = "ABCxyz019._~-"
LOOKALIKES = ["x~y", "x_y", "x.y", "x-y", "x~~y", "x~_y", "x_~y", "~", "_", "x~", "x_"]
LONGEST_TENANT = "~" * 128
LONGEST_DEPLOYMENT = "d" * 128  # a CloudFormation stack name is at most 128 characters


def names_for(tenant: str, prefixes: dict[str, str]) -> dict[str, str]:
    """Every secret name this host makes for `tenant`, by kind."""
    return {
        "callback signing": callback_secret_name(prefixes["WEBHOOK_SECRET_PREFIX"], tenant),
        "slack": slack_secret_name(tenant, prefixes["SLACK_SECRET_PREFIX"]),
        "action": secret_name(prefixes["ACTION_SECRET_PREFIX"], tenant, "payments-api"),
        "subscription": SubscriptionSecrets(None, prefixes["SUBSCRIPTION_SECRET_PREFIX"]).name(
            f"{tenant}/{mint_opaque()}"
        ),
    }


PREFIXES = [
    dict(wiring.SECRET_PREFIXES),
    {key: wiring.deployed_secret_prefix(key, LONGEST_DEPLOYMENT) for key in wiring.SECRET_PREFIXES},
]


@pytest.mark.parametrize("prefixes", PREFIXES, ids=["local", "deployed"])
def test_every_generated_name_is_one_secrets_manager_accepts(prefixes):
    tenants = [*LOOKALIKES, LONGEST_TENANT, TENANT_ALPHABET]
    for tenant in tenants:
        for kind, name in names_for(tenant, prefixes).items():
            assert AWS_SECRET_NAME.fullmatch(name), (kind, tenant, name)
    longest = secret_name(prefixes["ACTION_SECRET_PREFIX"], LONGEST_TENANT, "n" * 128)
    assert len(longest) <= 512


def test_distinct_tenants_never_share_a_secret_name():
    tenants = ["".join(p) for n in range(1, 4) for p in itertools.product("x~_.-", repeat=n)]
    for kind in ("callback signing", "slack"):
        names = {names_for(t, wiring.SECRET_PREFIXES)[kind] for t in tenants}
        assert len(names) == len(tenants), kind
    actions = {secret_name("p/", t, "n") for t in tenants}
    assert len(actions) == len(tenants)


def test_a_name_is_made_only_of_ids():
    for bad in ("", "a/b", "a\n", "a b", "a" * 129):
        with pytest.raises(ValueError, match="made of ids"):
            secret_name("p/", bad)


def test_a_subscription_registered_before_names_were_recorded_keeps_its_secret():
    secrets = SubscriptionSecrets(None, "interlude/subscriptions/")
    legacy = {"webhookId": "x~y/AbCdEfGhIjKlMnOpQrStUvWx"}
    assert secrets.name_of(legacy) == "interlude/subscriptions/x_y/AbCdEfGhIjKlMnOpQrStUvWx"
    recorded = {**legacy, "secretName": secrets.name(legacy["webhookId"])}
    assert secrets.name_of(recorded) == "interlude/subscriptions/x+y/AbCdEfGhIjKlMnOpQrStUvWx"
