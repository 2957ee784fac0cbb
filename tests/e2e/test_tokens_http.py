"""The signed-token surfaces over HTTP against the local stack: tampering, rotation, intents, expiry, 409s,
eligibility through a token's minter, the page's cross-site refusal, and GETs that change nothing."""

from __future__ import annotations

import json
import re
import time
import uuid

import requests

from interlude.local.keyring import LOCAL_KEY_RING_SECRET
from interlude.rules.tokens import KeyRing, TokenClaims, mint
from tests.support.local_stack import cli, stack_client, until, wire

FORM = "application/x-www-form-urlencoded"


def gate_workflow(api, **gate_config) -> str:
    workflow_id = f"tok-{uuid.uuid4().hex[:8]}"
    config = {"title": "Ship {{inputs.what}}?", "actions": ["accept", "reject"], **gate_config}
    definition = {
        "nodes": [
            {"id": "gate", "typeId": "core.approvalGate", "config": config},
            {"id": "after", "typeId": "core.noop"},
        ],
        "edges": [{"sourceNodeId": "gate", "targetNodeId": "after"}],
    }
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return workflow_id


def gated_run(api, **gate_config) -> str:
    return api.start(gate_workflow(api, **gate_config), inputs={"what": "it"})["runId"]


def minted(api, run_id: str, key: str | None = None, node: str = "gate", **body) -> dict:
    if body:
        got = api.call("POST", f"/runs/{wire(run_id)}/interrupts/{node}/tokens", body, key)
        assert got.status_code == 201, got.text
    else:
        got = api.call("GET", f"/runs/{wire(run_id)}/interrupts/{node}", key=key)
        assert got.status_code == 200, got.text
    return got.json()


def get_token(api, token: str, **headers: str) -> requests.Response:
    return requests.get(f"{api.base_url}/interrupts/{token}", headers=headers, timeout=30)


def post_token(api, token: str, body, content_type: str = "application/json", **headers: str) -> requests.Response:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return requests.post(
        f"{api.base_url}/interrupts/{token}", data=data, headers={"Content-Type": content_type, **headers}, timeout=30
    )


def accept(api, token: str) -> requests.Response:
    return post_token(api, token, {"resumeValue": {"action": "accept"}})


def local_ring(stack_info) -> KeyRing:
    client = stack_client(stack_info, "secretsmanager")
    return KeyRing.from_json(client.get_secret_value(SecretId=LOCAL_KEY_RING_SECRET)["SecretString"])


def eventually(check):
    # The api re-reads the ring at most once a second locally; wait for that, never for a fixed time.
    return until(check, timeout_s=30.0, interval_s=0.2)


def error(response: requests.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


# -- the token surfaces -----------------------------------------------------------------------------------


def test_a_token_reads_the_payload_and_resolves_as_its_minter_through_the_token_surface(api):
    run_id = gated_run(api)
    got = minted(api, run_id)
    assert set(got) == {"interruptId", "token", "expiresAt", "intent", "payload", "url"}
    assert got["intent"] == "resolve"
    assert got["token"].startswith("ow2.hs256.")
    assert got["url"] == f"{api.base_url}/interrupts/{got['token']}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z", got["expiresAt"])

    inspected = get_token(api, got["token"])
    assert inspected.status_code == 200
    assert inspected.json() == got["payload"]
    assert inspected.json()["data"]["title"] == "Ship it?"
    assert inspected.headers["Cache-Control"] == "no-store"

    resolved = accept(api, got["token"])
    assert resolved.status_code == 200, resolved.text
    assert resolved.json() == {"runId": run_id, "nodeId": "gate", "status": "completed"}
    decided = [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"][0]["payload"]
    assert decided["resolvedBy"]["subjectId"] == "demo-admin"
    assert decided["resumeValue"]["decidedBy"] == "demo-admin"


def test_the_decision_is_recorded_as_made_through_a_token(api):
    run_id = gated_run(api, requiredApprovals=2)
    assert accept(api, minted(api, run_id)["token"]).json()["status"] == "waiting-approval"
    votes = api.run(run_id)["extensions"]["interlude.run"]["openInterrupts"]["gate"]["votes"]
    assert [(v["surface"], v["action"]) for v in votes] == [("token", "accept")]
    assert votes[0]["principal"].endswith("|demo-admin")


def test_tampered_tokens_are_401_never_200_or_500(api):
    token = minted(api, gated_run(api))["token"]
    prefix, alg, kid, payload, mac = token.split(".")
    flip = {"A": "B", "B": "A"}
    variants = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),  # the MAC's last character
        ".".join([prefix, alg, kid, payload[:-2] + flip.get(payload[-2], "A") + payload[-1], mac]),
        ".".join([prefix, "HS256", kid, payload, mac]),
        ".".join([prefix, "none", kid, payload, ""]),
        ".".join([prefix, "hs512", kid, payload, mac]),
        ".".join(["ow1", alg, kid, payload, mac]),
        ".".join([prefix, alg, "unknown-kid", payload, mac]),
        ".".join([prefix, alg, kid, payload]),
        ".".join([prefix, alg, kid, payload, mac, mac]),
        ".".join([prefix, alg, kid, payload + "=", mac]),
        ".".join([prefix, alg, kid, payload, mac + "=="]),
        token.upper(),
        token + "A" * 2100,
        token.replace("ow2.", "", 1),
        "ow2",
        "not-a-token",
    ]
    for variant in variants:
        got = get_token(api, variant)
        assert error(got) == (401, "interrupt_token_invalid"), (variant, got.text)
        posted = accept(api, variant)
        assert error(posted) == (401, "interrupt_token_invalid"), (variant, posted.text)
    # Non-ASCII in the path (percent-encoded on the wire) is refused the same way
    assert error(get_token(api, token[:-1] + "%C3%A9")) == (401, "interrupt_token_invalid")


def test_a_valid_token_for_an_unknown_interrupt_or_run_is_404(api, stack_info):
    ring = local_ring(stack_info)
    run_id = gated_run(api)
    for claims in (
        TokenClaims(f"{api.tenant}/{'x' * 24}", run_id, "gate", int(time.time()) + 600, "resolve"),
        TokenClaims(f"{api.tenant}/{'x' * 24}", f"{api.tenant}/{'y' * 24}", "gate", int(time.time()) + 600, "resolve"),
    ):
        token = mint(claims, ring)
        assert error(get_token(api, token)) == (404, "not_found")
        assert error(accept(api, token)) == (404, "not_found")
    assert api.run(run_id)["status"] == "waiting-approval"


def test_an_inspect_token_reads_but_may_not_resolve(api):
    run_id = gated_run(api)
    token = minted(api, run_id, intent="inspect")["token"]
    assert get_token(api, token).status_code == 200
    assert error(accept(api, token)) == (403, "forbidden")
    assert api.run(run_id)["status"] == "waiting-approval"
    # A key holding only runs:read gets inspect tokens from GET and may not mint with POST
    reader = api.new_key(["runs:read"])
    assert minted(api, run_id, key=reader)["intent"] == "inspect"
    refused = api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate/tokens", {"intent": "resolve"}, reader)
    assert error(refused) == (403, "forbidden")


def test_mint_body_is_closed_and_lifetimes_only_shorten(api):
    run_id = gated_run(api)
    path = f"/runs/{wire(run_id)}/interrupts/gate/tokens"
    for body in ({"intent": "admin"}, {"intent": "resolve", "lifetimeSeconds": 1801}, {"intent": "resolve", "x": 1},
                 {"intent": "resolve", "lifetimeSeconds": 0}, {}):
        assert error(api.call("POST", path, body)) == (400, "validation_error"), body
    short = minted(api, run_id, intent="resolve", lifetimeSeconds=60)
    full = minted(api, run_id)
    assert short["expiresAt"] < full["expiresAt"]
    assert error(api.call("GET", f"/runs/{wire(run_id)}/interrupts/nope")) == (404, "not_found")


def test_an_expired_token_is_410(api):
    run_id = gated_run(api)
    token = minted(api, run_id, intent="resolve", lifetimeSeconds=1)["token"]
    got = eventually(lambda: get_token(api, token).status_code == 410)
    assert got
    assert error(get_token(api, token)) == (410, "interrupt_expired")
    assert error(accept(api, token)) == (410, "interrupt_expired")
    page = get_token(api, token, Accept="text/html")
    assert page.status_code == 410
    assert "This link has expired" in page.text
    assert api.run(run_id)["status"] == "waiting-approval"


def test_a_token_dies_with_its_interrupt_409_after_resolution_and_after_cancel(api):
    run_id = gated_run(api)
    token = minted(api, run_id)["token"]
    assert api.resolve(run_id, "gate", {"action": "accept"}).status_code == 200
    assert error(get_token(api, token)) == (409, "interrupt_already_resolved")
    assert error(accept(api, token)) == (409, "interrupt_already_resolved")

    cancelled = gated_run(api)
    token = minted(api, cancelled)["token"]
    assert api.call("POST", f"/runs/{wire(cancelled)}/cancel", {}).status_code == 200
    assert error(get_token(api, token)) == (409, "interrupt_already_resolved")
    assert error(accept(api, token)) == (409, "interrupt_already_resolved")
    page = get_token(api, token, Accept="text/html")
    assert page.status_code == 409
    # Nobody decided it: the page says it was withdrawn with its run.
    assert "No longer open" in page.text
    assert "This request was withdrawn: its run was cancelled" in page.text


def test_tokens_obey_eligibility_and_quorum_through_their_minters(api):
    run_id = gated_run(api, approversList=["alice", "bob"], requiredApprovals=2)
    alice = api.new_key(["runs:read", "approvals:respond"], subject="alice")
    bob = api.new_key(["runs:read", "approvals:respond"], subject="bob")
    # The admin is not a named approver: a token it mints carries no eligibility
    refused = accept(api, minted(api, run_id)["token"])
    assert error(refused) == (403, "forbidden")
    # Alice's token counts once, however many of her tokens are used
    assert accept(api, minted(api, run_id, key=alice)["token"]).json()["status"] == "waiting-approval"
    assert error(accept(api, minted(api, run_id, key=alice)["token"])) == (409, "interlude.vote_already_cast")
    # Bob's completes the quorum
    assert accept(api, minted(api, run_id, key=bob)["token"]).json()["status"] == "completed"


def test_rotation_keeps_old_tokens_until_their_kid_is_retired(api, stack_info):
    before_a = minted(api, gated_run(api))["token"]
    before_b = minted(api, gated_run(api))["token"]
    old_kid = before_a.split(".")[2]

    rotated = cli(stack_info, "tokens", "rotate", "--local").stdout
    assert old_kid in rotated
    # Tokens minted after the rotation are signed with the new kid (once the api has re-read the ring)
    new_run = gated_run(api)
    def minted_under_new_kid() -> str | None:
        token = minted(api, new_run)["token"]
        return token if token.split(".")[2] != old_kid else None

    after = eventually(minted_under_new_kid)
    assert after
    # A token minted before the rotation still resolves
    assert accept(api, before_a).status_code == 200

    cli(stack_info, "tokens", "retire", old_kid, "--local")
    # After its kid is retired, a token minted under it is 401; the new kid's token still works
    # Every api instance (a process each, as on Lambda) re-reads the ring on its own schedule.
    assert eventually(lambda: all(get_token(api, before_b).status_code == 401 for _ in range(8)))
    assert error(accept(api, before_b)) == (401, "interrupt_token_invalid")
    assert accept(api, after).status_code == 200


def test_retiring_the_current_kid_is_refused(stack_info):
    current = local_ring(stack_info).current_kid
    done = cli(stack_info, "tokens", "retire", current, "--local", check=False)
    assert done.returncode != 0
    assert "rotate before retiring" in done.stderr


# -- the page ---------------------------------------------------------------------------------------------


def open_page(api, token: str) -> tuple[requests.Session, str]:
    session = requests.Session()
    page = session.get(f"{api.base_url}/interrupts/{token}", headers={"Accept": "text/html"}, timeout=30)
    assert page.status_code == 200
    field = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
    assert field is not None
    return session, field.group(1)


def submit(session: requests.Session, api, token: str, data: dict, **headers: str) -> requests.Response:
    return session.post(
        f"{api.base_url}/interrupts/{token}", data=data, headers={"Content-Type": FORM, **headers}, timeout=30
    )


def test_the_page_refuses_a_cross_site_form_post(api):
    run_id = gated_run(api)
    token = minted(api, run_id)["token"]
    session, field = open_page(api, token)
    # A browser saying the form came from another site is refused, even with the right cookie and field
    got = submit(session, api, token, {"csrf": field, "action": "accept"}, **{"Sec-Fetch-Site": "cross-site"})
    assert got.status_code == 403
    assert "Not sent from this page" in got.text
    got = submit(session, api, token, {"csrf": field, "action": "accept"}, Origin="https://evil.example")
    assert got.status_code == 403
    # A post without the page's cookie (what a cross-site form gets under SameSite=Strict) is refused
    got = submit(requests.Session(), api, token, {"csrf": field, "action": "accept"})
    assert got.status_code == 403
    # A forged field is refused
    got = submit(session, api, token, {"csrf": "0" * 64, "action": "accept"})
    assert got.status_code == 403
    assert api.run(run_id)["status"] == "waiting-approval"
    # The page's own submission goes through (Origin: null is what a no-referrer page's POST carries)
    got = submit(session, api, token, {"csrf": field, "action": "reject"}, Origin="null",
                 **{"Sec-Fetch-Site": "same-origin"})
    assert got.status_code == 200
    assert "You rejected this request." in got.text
    assert api.run(run_id)["status"] == "failed"


def test_a_form_that_does_not_make_a_resume_value_re_renders_with_the_reason(api):
    run_id = gated_run(api, actions=["accept", "edit-accept"])
    token = minted(api, run_id)["token"]
    session, field = open_page(api, token)
    got = submit(session, api, token, {"csrf": field, "action": "edit-accept", "edited": "{not json"})
    assert got.status_code == 400
    # The gate has no artifact: its edit is asked as JSON, and the reason is said beside that field, the text kept
    assert '<p class="field-error" id="edited-error">This is not valid JSON; check the brackets, commas and quotes.</p>' in got.text
    assert ">{not json</textarea>" in got.text
    got = submit(session, api, token, {"csrf": field, "action": "reject"})
    assert got.status_code == 400
    assert "Choose one of the buttons" in got.text
    assert api.run(run_id)["status"] == "waiting-approval"


def test_get_never_changes_state(api):
    run_id = gated_run(api)
    token = minted(api, run_id)["token"]
    before = api.run(run_id)
    events_before = api.events(run_id)
    for _ in range(3):
        assert get_token(api, token).status_code == 200
        assert get_token(api, token, Accept="text/html").status_code == 200
        assert minted(api, run_id)["token"]
    assert api.run(run_id) == before
    assert api.events(run_id) == events_before


def test_the_page_escapes_what_it_shows(api):
    run_id = api.start(
        gate_workflow(api, description="{{inputs.what}}"), inputs={"what": '<script>alert(1)</script>"'}
    )["runId"]
    page = get_token(api, minted(api, run_id)["token"], Accept="text/html")
    assert "<script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in page.text
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]


def test_discovery_advertises_the_token_algs_and_openapi_the_routes(api):
    caps = requests.get(f"{api.base_url}/.well-known/openwop", timeout=30).json()
    assert caps["interrupt"]["tokenAlgs"] == ["hs256"]
    paths = requests.get(f"{api.base_url}/openapi.json", timeout=30).json()["paths"]
    assert set(paths["/interrupts/{token}"]) == {"get", "post"}
    assert paths["/interrupts/{token}"]["get"]["security"] == []
    assert "post" in paths["/runs/{runId}/interrupts/{nodeId}/tokens"]
    assert "get" in paths["/runs/{runId}/interrupts/{nodeId}"]


def test_a_form_body_that_is_not_utf8_is_refused_as_a_page_not_a_crash(api):
    run_id = gated_run(api)
    token = minted(api, run_id)["token"]
    got = post_token(api, token, b"\xff\xfeaction=accept", "application/x-www-form-urlencoded")
    assert got.status_code == 400
    assert got.headers["Content-Type"].startswith("text/html")
    assert api.run(run_id)["status"] == "waiting-approval"
