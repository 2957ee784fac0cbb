"""Callback notices, backoff, dead letters and signatures (pure)."""

from __future__ import annotations

import re
import time

from standardwebhooks import Webhook

from interlude.adapters.delivery.notices import notice_id
from interlude.adapters.delivery.retry import dead_letter, origin_of
from interlude.adapters.delivery.signing import live_secrets, new_secret, secret_name, webhook_headers
from interlude.adapters.leased_work import backoff_s


def test_notice_ids_are_stable_per_event_and_valid_webhook_ids():
    assert notice_id("acme/run-1", 3) == notice_id("acme/run-1", 3)
    assert notice_id("acme/run-1", 3) != notice_id("acme/run-1", 4)
    assert notice_id("acme/run-1", 3) != notice_id("acme/run-2", 3)
    assert re.fullmatch(r"[A-Za-z0-9_-]{16,128}", notice_id("acme/run-1", 3))


def test_backoff_doubles_up_to_the_cap_with_equal_jitter():
    assert [backoff_s(n, 30, 3600, rand=lambda: 1.0) for n in range(1, 9)] == [30, 60, 120, 240, 480, 960, 1920, 3600]
    assert [backoff_s(n, 30, 3600, rand=lambda: 0.0) for n in range(1, 4)] == [15, 30, 60]
    assert backoff_s(1, 0, 3600) == 0


def test_dead_letter_keeps_identity_and_history_but_no_body_token_or_url_path():
    message = {
        "tenant": "acme",
        "callbackUrl": "https://hooks.example.com:8443/p/secret-path?sig=abc",
        "notice": {
            "id": "ntc_x",
            "type": "interrupt.requested",
            "runId": "acme/r",
            "sequence": 2,
            "nodeId": "gate",
            "token": "ow2.hs256.k.p.m",
            "payload": {"data": "private"},
            "links": {"resolve": "https://x/t"},
        },
    }
    record = dead_letter(message, [{"attempt": 1, "status": "failed"}], "2026-01-01T00:00:00Z")
    assert record["callbackOrigin"] == "https://hooks.example.com:8443"
    assert (record["noticeId"], record["nodeId"], record["attempts"]) == ("ntc_x", "gate", 1)
    text = str(record)
    for secret in ("ow2.hs256", "private", "secret-path", "sig=abc", "https://x/t"):
        assert secret not in text
    assert origin_of("https://[2606:4700::1]/x") == "https://[2606:4700::1]"


def test_headers_verify_with_the_reference_library_for_each_live_secret():
    old, new = new_secret(), new_secret()
    now = time.time()
    value = {
        "current": new,
        "previous": [{"secret": old, "until": now + 60}, {"secret": "whsec_AAAA", "until": now - 1}],
    }
    secrets = live_secrets(value, now)
    assert secrets == [new, old]
    body = '{"id":"ntc_abc"}'
    headers = webhook_headers(secrets, "ntc_abc", int(now), body)
    assert headers["webhook-id"] == "ntc_abc"
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(body, headers) == {"id": "ntc_abc"}


def test_tenant_secret_names_fit_secrets_manager():
    # A tenant without '~' keeps the name it always had; one with '~' gets '+', which no tenant id holds
    assert secret_name("interlude/webhooks/", "a.b_c-d") == "interlude/webhooks/a.b_c-d"
    assert secret_name("interlude/webhooks/", "a.b~c-d") == "interlude/webhooks/a.b+c-d"
