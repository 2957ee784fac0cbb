"""Issue 26 rows 10 and 11 over HTTP on the local stack, through the published openwop-client: discovery advertises
idempotency Layer 2 and, since forks are served (issue 29 item 2), replay; it carries an ETag and answers a matching
If-None-Match with 304; the effect-seam manifest (a replay operation) is served in the shape the client reads."""

from __future__ import annotations

import requests
from openwop_client import OpenwopClient

from tests.support.local_stack import Api


def test_discovery_advertises_idempotency_and_replay_to_openwop_client(api: Api) -> None:
    caps = OpenwopClient(api.base_url, api.api_key).discovery_capabilities()
    idempotency = caps.families["idempotency"]
    assert (idempotency.status, idempotency.since, idempotency.witness) == ("stable", "2.0", "witnessable-gated")
    # Forks are served (issue 29 item 2), as experimental: a fork re-runs its history rather than copying its log (ADR 0108)
    assert caps.families["replay"].status == "experimental"


def test_discovery_answers_if_none_match_with_304(api: Api) -> None:
    first = requests.get(api.base_url + "/.well-known/openwop", timeout=30)
    etag = first.headers["ETag"]
    again = requests.get(api.base_url + "/.well-known/openwop", headers={"If-None-Match": etag}, timeout=30)
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["ETag"] == etag
    assert again.headers["OpenWOP-Version"] == "2.0"
    changed = requests.get(api.base_url + "/.well-known/openwop", headers={"If-None-Match": '"older"'}, timeout=30)
    assert changed.status_code == 200
    assert changed.json() == first.json()


def test_the_effect_seam_manifest_is_served_through_openwop_client_once_replay_is_advertised(api: Api) -> None:
    manifest = OpenwopClient(api.base_url, api.api_key).host_effect_seams()
    assert [(s.seam, s.kind, s.guarded) for s in manifest.seams] == [("interlude.core-http", "http", True)]
