"""Issue 26 rows 10 and 11 in process (moto, the real api handler): discovery carries an ETag of its bytes and answers
a matching If-None-Match with 304; it advertises what this host serves, `idempotency` among them; and every gated
OpenWOP operation answers 404 exactly when its family is not advertised, the effect-seam manifest (a `replay`
operation) included, which is served in the shape openwop-client reads once `replay` is advertised."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openwop_client import OpenwopClient
from openwop_client.errors import WopError

from interlude import wiring
from interlude.api import effects
from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from tests.integration.conftest import new_api_key, signed_in
from tests.support.local_stack import wire

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}

# The OpenWOP operations gated on a family (capabilities.md: a gated operation of a family the host does not
# advertise answers 404 not_found), each with a request that reaches it; `{run}` is a run of the caller's tenant.
GATED = [
    ("runList", "listRuns", "GET", "/runs"),
    ("webhooks", "registerWebhook", "POST", "/webhooks"),
    ("idempotency", "getRunEffects", "GET", "/runs/{run}/effects"),
    ("auditLogIntegrity", "verifyAuditLog", "GET", "/audit/verify?fromSeq=0&toSeq=10"),
    ("multiAgent", "getRunAncestry", "GET", "/runs/{run}/ancestry"),
    ("replay", "getEffectSeamManifest", "GET", "/host/effect-seams"),
    ("replay", "forkRun", "POST", "/runs/{run}:fork"),
    ("replay", "diffRun", "GET", "/runs/{run}:diff?against={run}"),
    # Operations of families this host serves nothing of: no route names them, a run's route included.
    ("compensation", "getRunCompensation", "GET", "/runs/{run}/compensation"),
]


def http(method: str, path: str, key: str | None = None, **headers: str) -> tuple[int, dict[str, str], Any]:
    """A request through the real api handler, as the gateway hands it over."""
    sent = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {}), **headers}
    body = b"{}" if method == "POST" else b""
    got = lambda_runtime.invoke("api", to_event(method, path, sent, body, "127.0.0.1"))
    return got["statusCode"], got.get("headers") or {}, json.loads(got["body"]) if got.get("body") else None


def discovery() -> dict[str, Any]:
    status, _, caps = http("GET", "/.well-known/openwop")
    assert status == 200
    return caps


def a_run(services: Services) -> str:
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf"})).runId


def test_discovery_carries_an_etag_of_its_bytes_and_answers_a_matching_if_none_match_with_304(services, monkeypatch):
    status, headers, _ = http("GET", "/.well-known/openwop")
    etag = headers["ETag"]
    assert status == 200
    assert etag.startswith('"')
    assert etag.endswith('"')
    for named in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        status, headers, body = http("GET", "/.well-known/openwop", **{"if-none-match": named})
        assert (status, body) == (304, None), named
        assert headers["ETag"] == etag
        assert headers["OpenWOP-Version"] == "2.0"
    assert http("GET", "/.well-known/openwop", **{"if-none-match": '"stale"'})[0] == 200

    # Another document (the ancestry switch off) has another ETag: the old one no longer matches.
    monkeypatch.setenv("INTERLUDE_ANCESTRY_ENDPOINT", "off")
    lambda_runtime.fresh_instances()
    status, headers, _ = http("GET", "/.well-known/openwop", **{"if-none-match": etag})
    assert status == 200
    assert headers["ETag"] != etag


def test_discovery_advertises_idempotency_layer_2_and_replay(services):
    caps = discovery()
    assert caps["idempotency"] == {"status": "stable", "since": "2.0", "witness": "witnessable-gated"}
    assert caps["replay"]["modes"] == ["fork", "branch"]
    assert caps["replay"]["effectSeamsManifest"] == "/host/effect-seams"


def test_an_unserved_custom_method_of_a_run_is_404_never_the_run(services):
    run_id = a_run(services)
    status, _, body = http("GET", f"/runs/{wire(run_id)}:pause", new_api_key(services))
    assert (status, body["error"]) == (404, "not_found")


def gated_statuses(services: Services, key: str, run_id: str) -> dict[str, tuple[int, str | None]]:
    statuses = {}
    for _, operation, method, path in GATED:
        status, _, body = http(method, path.format(run=wire(run_id)), key)
        statuses[operation] = (status, (body or {}).get("error"))
    return statuses


def test_every_gated_operation_answers_404_exactly_when_its_family_is_unadvertised(services, monkeypatch):
    run_id = a_run(services)
    key = new_api_key(services)

    def check() -> set[str]:
        caps = discovery()
        statuses = gated_statuses(services, key, run_id)
        for family, operation, _, _ in GATED:
            status, error = statuses[operation]
            if family in caps:
                assert status != 404, (operation, error)
            else:
                assert (status, error) == (404, "not_found"), operation
        return {family for family, *_ in GATED if family in caps}

    assert check() == {"runList", "webhooks", "idempotency", "auditLogIntegrity", "multiAgent", "replay"}
    # The audit key unreadable and the ancestry route switched off: both families leave discovery, their routes 404.
    monkeypatch.setenv(wiring.AUDIT_KEY_SECRET.env, "interlude-test/no-such-secret")
    monkeypatch.setenv("INTERLUDE_ANCESTRY_ENDPOINT", "off")
    lambda_runtime.fresh_instances()
    assert check() == {"runList", "webhooks", "idempotency", "replay"}


def test_the_seam_manifest_is_in_the_shape_openwop_client_reads_and_404_once_replay_is_withdrawn(
    services, gateway, monkeypatch
):
    client = OpenwopClient(gateway, new_api_key(services))
    assert "replay" in client.discovery_capabilities().families
    manifest = client.host_effect_seams()
    assert manifest.manifestVersion == "1"
    assert [(s.seam, s.kind, s.guarded) for s in manifest.seams] == [("interlude.core-http", "http", True)]
    assert manifest.seams[0].guardedBy
    assert manifest.host["build"]["kind"] == "artifact-sha256"

    # The one declaration discovery and the route read (api/effects.py): withdrawn, neither names it.
    monkeypatch.setattr(effects, "REPLAY_CAPABILITY", None)
    assert "replay" not in client.discovery_capabilities().families
    with pytest.raises(WopError) as refused:
        client.host_effect_seams()
    assert (refused.value.status, refused.value.envelope.error) == (404, "not_found")
