"""Replay what failed (issue 30 item 5) over HTTP on the real local stack: receivers on 127.0.0.1 that are down for a
while (their scripts fail every attempt), then recover; each dead letter sent again arrives once more under its
original delivery id, and a core.http action failed for good runs again from its run, its effect made once."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from interlude.domain.clock import epoch_of, iso
from tests.support.console import Console
from tests.support.local_stack import Api, cli, quiesce, running_stack, stack_client, until, wire
from tests.support.receiver import Receiver, delivering_to_loopback

ATTEMPTS = 2
RETRY_FORM = re.compile(r'<form method="post" action="/console/dead-letters/retry">.*?</form>', re.S)
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
GATE = {
    "nodes": [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Publish?"}}],
    "edges": [],
}


def action_workflow(url: str) -> dict:
    return {
        "nodes": [
            {
                "id": "charge",
                "typeId": "core.http",
                "config": {"url": url, "body": {"order": "{{inputs.orderId}}"}, "maxAttempts": 1},
            },
        ],
        "edges": [],
        "variables": [{"name": "orderId", "type": "string"}],
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {
        **delivering_to_loopback(ATTEMPTS),
        "INTERLUDE_ACTION_BACKOFF_BASE_S": "0",
    }
    with running_stack(tmp_path_factory.mktemp("replay"), env) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack):
    api = Api.of(stack)
    assert api.put_workflow("gate", GATE).status_code == 201
    return api


@pytest.fixture
def subscription(api, receiver):
    made = api.call("POST", "/webhooks", {"url": receiver.url(), "events": ["interrupt.requested"]})
    assert made.status_code == 201, made.text
    webhook_id = made.json()["webhookId"]
    yield webhook_id
    api.call("DELETE", f"/webhooks/{wire(webhook_id)}")


def dead_letters(api: Api, webhook_id: str) -> list[dict]:
    got = api.call("GET", f"/webhooks/{wire(webhook_id)}/dead-letters")
    assert got.status_code == 200, got.text
    return got.json()["deliveries"]


def hits_once_idle(stack: dict, receiver: Receiver) -> int:
    """How many requests the receiver got once every background effect of what was asked so far has landed
    (`quiesce`): a delivery or call made once too often is among them, with no fixed wait."""
    quiesce(stack)
    return len(receiver.hits)


def refused(got, status: int, code: str) -> dict:
    assert got.status_code == status, got.text
    assert got.json()["error"] == code
    return got.json()


def test_a_dead_lettered_webhook_delivery_retried_arrives_again_under_its_delivery_id(
    stack, api, receiver, subscription
):
    # Given an endpoint down for every attempt of a delivery, which is dead-lettered
    receiver.script[:] = [500] * ATTEMPTS
    run_id = api.start("gate")["runId"]
    (dead,) = until(lambda: dead_letters(api, subscription), timeout_s=60)
    assert (dead["runId"], len(receiver.hits)) == (run_id, ATTEMPTS)

    # When the endpoint is back and the dead letter is retried
    retry = f"/webhooks/{wire(subscription)}/dead-letters/{wire(dead['deliveryId'])}/retry"
    got = api.call("POST", retry)

    # Then it is queued as the next attempt, arrives once more with the same delivery id and event, and leaves the
    # dead letters
    assert got.status_code == 200, got.text
    assert got.json() == {
        "status": "queued", "attempt": ATTEMPTS + 1, "replay": 1,
        "runId": run_id, "deliveryId": dead["deliveryId"], "webhookId": subscription,
    }
    hits = receiver.wait_for(ATTEMPTS + 1, timeout_s=60)
    assert len({h.headers["webhook-id"] for h in hits}) == 1
    assert len({json.loads(h.body)["event"]["eventId"] for h in hits}) == 1
    assert dead_letters(api, subscription) == []

    # And a second retry finds no dead letter (it was delivered), so nothing is sent twice
    refused(api.call("POST", retry), 404, "not_found")
    assert hits_once_idle(stack, receiver) == ATTEMPTS + 1
    # And a delivery id the subscription never dead-lettered is not found; another tenant's id is refused
    unknown = f"{api.tenant}/whd_{uuid.uuid4().hex}"
    refused(api.call("POST", f"/webhooks/{wire(subscription)}/dead-letters/{wire(unknown)}/retry"), 404, "not_found")
    foreign = f"other-tenant/whd_{uuid.uuid4().hex}"
    refused(
        api.call("POST", f"/webhooks/{wire(subscription)}/dead-letters/{wire(foreign)}/retry"), 403, "id_tenant_mismatch"
    )


def test_recover_since_sends_each_dead_letter_once_with_its_original_delivery_id(api, receiver, subscription):
    since = iso(datetime.now(UTC) - timedelta(seconds=1))
    # Given an endpoint down for a while: three runs' deliveries are dead-lettered
    receiver.script[:] = [500] * (3 * ATTEMPTS)
    runs = {api.start("gate")["runId"] for _ in range(3)}
    dead = until(lambda: len(page := dead_letters(api, subscription)) == 3 and page, timeout_s=90)
    assert {d["runId"] for d in dead} == runs
    first_ids = {h.headers["webhook-id"] for h in receiver.hits}

    # When it has recovered, and its dead letters since then are recovered
    got = api.call("POST", f"/webhooks/{wire(subscription)}/dead-letters:recover", {"since": since})

    # Then all three are queued again, each delivered once more under its original delivery id
    assert got.status_code == 200, got.text
    answer = got.json()
    assert (answer["status"], answer["matched"], answer["queued"], answer["skipped"]) == ("completed", 3, 3, 0)
    hits = receiver.wait_for(4 * ATTEMPTS + 1, timeout_s=60)
    replayed = Counter(h.headers["webhook-id"] for h in hits[3 * ATTEMPTS :])
    assert set(replayed) == first_ids
    assert set(replayed.values()) == {1}
    assert dead_letters(api, subscription) == []

    # And recovering again sends nothing: none is dead any more
    again = api.call("POST", f"/webhooks/{wire(subscription)}/dead-letters:recover", {"since": since})
    assert (again.json()["matched"], again.json()["queued"]) == (0, 0)
    # And a window that ends before it starts is refused
    later = iso(datetime.now(UTC) + timedelta(hours=1))
    body = {"since": later, "until": since}
    refused(api.call("POST", f"/webhooks/{wire(subscription)}/dead-letters:recover", body), 400, "validation_error")


def test_a_runs_dead_callback_notices_retried_and_recovered(api, receiver):
    # Given two runs whose callbackUrl is down for every attempt of their gates' notices
    receiver.script[:] = [500] * (2 * ATTEMPTS)
    runs = [api.start("gate", callbackUrl=receiver.url("/callback"))["runId"] for _ in range(2)]
    receiver.wait_for(2 * ATTEMPTS, timeout_s=60)

    def dead_notice(run_id: str) -> str:
        listed = lambda: api.call("GET", f"/runs/{wire(run_id)}/deliveries").json()["deliveries"]  # noqa: E731
        last = until(lambda: [d for d in listed() if d.get("attempt") == ATTEMPTS and d.get("final")], timeout_s=30)
        return last[0]["noticeId"]

    notices = [dead_notice(run_id) for run_id in runs]

    # When the first run's notice is retried, and the second run's dead notices are recovered
    got = api.call("POST", f"/runs/{wire(runs[0])}/deliveries/{notices[0]}/retry")
    recovered = api.call("POST", f"/runs/{wire(runs[1])}/deliveries:recover")

    # Then each notice arrives once more under its own id
    assert got.status_code == 200, got.text
    assert (got.json()["deliveryId"], got.json()["attempt"]) == (notices[0], ATTEMPTS + 1)
    assert recovered.status_code == 200, recovered.text
    answer = recovered.json()
    assert (answer["kind"], answer["matched"], answer["queued"]) == ("callback-deliveries", 1, 1)
    hits = receiver.wait_for(2 * ATTEMPTS + 2, timeout_s=60)
    assert Counter(h.headers["webhook-id"] for h in hits) == {notices[0]: ATTEMPTS + 1, notices[1]: ATTEMPTS + 1}
    # And a retry of a delivered notice, or of none, is refused; so is a notification the run never had
    refused(api.call("POST", f"/runs/{wire(runs[0])}/deliveries/{notices[0]}/retry"), 409, "interlude.not_dead_lettered")
    refused(api.call("POST", f"/runs/{wire(runs[0])}/deliveries/ntc_unknown/retry"), 404, "not_found")
    refused(api.call("POST", f"/runs/{wire(runs[0])}/notifications/nt_unknown/retry"), 404, "not_found")
    assert api.call("POST", f"/runs/{wire(runs[1])}/deliveries:recover").json()["matched"] == 0


def expiries(stack: dict, run_id: str, skip_ledger: bool = False) -> dict[str, int | None]:
    """Each item of the run's partition (by sort key) and its ttl (None: none); `skip_ledger`: without the effect
    ledger's entries, which keep their own (at least 14 days past the effect)."""
    tenant, opaque = run_id.split("/", 1)
    items = stack_client(stack, "dynamodb").query(
        TableName="interlude-local",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"T#{tenant}#R#{opaque}"}},
        ConsistentRead=True,
    )["Items"]
    return {
        i["sk"]["S"]: int(i["ttl"]["N"]) if "ttl" in i else None
        for i in items
        if not (skip_ledger and i["sk"]["S"].startswith("X#"))
    }


def test_a_failed_core_http_action_retried_once_its_cause_is_fixed_runs_once(stack, api, receiver):
    # Given a run whose action's endpoint was down, so the run failed at it
    assert api.put_workflow("charge", action_workflow(receiver.url("/charges"))).status_code == 201
    receiver.script[:] = [503]
    run_id = api.start("charge", inputs={"orderId": "o-1"})["runId"]
    failed = api.wait_status(run_id, {"failed", "completed"}, timeout_s=60)
    assert failed["status"] == "failed", failed
    # (a failed run is finished: its retention job gives every item of it its expiry, issue 30 item 4)
    assert until(lambda: expiries(stack, run_id) and None not in expiries(stack, run_id).values(), 30)
    cli(stack, "clock", "advance", "5")  # so that the run's next end is another second than this one
    # A run that has not failed at an action cannot take it again
    waiting = api.start("gate")["runId"]
    refused(api.call("POST", f"/runs/{wire(waiting)}/actions/review/retry"), 409, "interlude.action_not_retryable")

    # When the endpoint is back and the action is retried from the run
    got = api.call("POST", f"/runs/{wire(run_id)}/actions/charge/retry")

    # Then the run goes on and completes, the call made once more under the same Idempotency-Key, one effect
    assert got.status_code == 200, got.text
    assert api.wait_status(run_id, {"completed", "failed"}, timeout_s=60)["status"] == "completed"
    # and its items expire again with its new end (or, written before it, with their later provisional expiry: ADR
    # 0133), not with the failure's: running again gave them the provisional one back
    ended = int(epoch_of(api.run(run_id)["completedAt"])) + 90 * 24 * 3600
    assert ended > int(epoch_of(failed["completedAt"])) + 90 * 24 * 3600

    def expire_with_the_new_end() -> bool:
        held = set(expiries(stack, run_id, skip_ledger=True).values())
        return ended in held and all(ttl is not None and ttl >= ended for ttl in held)

    assert until(expire_with_the_new_end, 30)
    hits = receiver.wait_for(2, timeout_s=60)
    assert len(hits) == 2
    assert hits[0].headers["idempotency-key"] == hits[1].headers["idempotency-key"]
    (effect,) = api.call("GET", f"/runs/{wire(run_id)}/effects").json()["effects"]
    assert (effect["effectId"], effect["state"]) == (got.json()["effectId"], "completed")
    # And retrying again is refused: the run no longer stands failed at it
    refused(api.call("POST", f"/runs/{wire(run_id)}/actions/charge/retry"), 409, "interlude.action_not_retryable")
    assert hits_once_idle(stack, receiver) == 2


def test_the_cli_lists_dead_letters_and_sends_one_again(stack, api, receiver, subscription):
    # Given a delivery dead-lettered while its endpoint was down
    receiver.script[:] = [500] * ATTEMPTS
    run_id = api.start("gate")["runId"]
    (dead,) = until(lambda: dead_letters(api, subscription), timeout_s=60)

    # When the operator lists the subscription's dead letters: a table a person reads (no escaped ids)
    listed = cli(stack, "deliveries", "dead", "--webhook", subscription).stdout
    header, row = listed.splitlines()
    assert header.split() == ["DEAD", "SINCE", "DELIVERY", "RUN", "EVENT", "ATTEMPTS", "WHY"]
    assert dead["deliveryId"] in row
    assert run_id in row
    assert "every attempt failed (last answer 500)" in row
    assert "~2F" not in listed

    # And sends it again
    sent = cli(stack, "deliveries", "retry", dead["deliveryId"], "--webhook", subscription).stdout
    assert sent.strip() == f"delivery {dead['deliveryId']} queued again: attempt {ATTEMPTS + 1}, replay 1"

    # Then it arrives once more under its delivery id; sending it again is refused in one line
    hits = receiver.wait_for(ATTEMPTS + 1, timeout_s=60)
    assert len({h.headers["webhook-id"] for h in hits}) == 1
    again = cli(stack, "deliveries", "retry", dead["deliveryId"], "--webhook", subscription, check=False)
    assert again.returncode == 1
    assert again.stderr.strip().startswith("interlude: 404 not_found")
    recovered = cli(stack, "deliveries", "recover", "--webhook", subscription, "--since", "2026-01-01T00:00:00Z")
    assert recovered.stdout.strip() == "0 of 0 dead letters queued again"


def test_the_console_shows_dead_letters_with_a_retry_button_that_sends_one_again(
    stack, api, receiver, subscription
):
    # Given a delivery dead-lettered while its endpoint was down
    receiver.script[:] = [500] * ATTEMPTS
    run_id = api.start("gate")["runId"]
    (dead,) = until(lambda: dead_letters(api, subscription), timeout_s=60)
    console = Console(api).signed_in(api.api_key)

    # When the operator opens the dead letters: the subscription's URL, the run, why, and a Retry button
    page = console.get("/console/dead-letters")
    assert page.status_code == 200
    assert receiver.url() in page.text
    assert f'class="mono">{run_id}</a>' in page.text
    assert "Every attempt failed (last answer: HTTP 500)" in page.text
    form = RETRY_FORM.search(page.text)
    assert form, page.text
    fields = dict(HIDDEN.findall(form.group(0)))
    assert fields["deliveryId"] == dead["deliveryId"]

    # And presses it
    sent = console.post("/console/dead-letters/retry", fields)

    # Then the page says so, the delivery arrives once more under its delivery id, and leaves the list
    assert sent.status_code == 200
    assert "Sent again" in sent.text
    hits = receiver.wait_for(ATTEMPTS + 1, timeout_s=60)
    assert len({h.headers["webhook-id"] for h in hits}) == 1
    assert run_id not in console.get("/console/dead-letters").text
    # And pressing it again changes nothing: the page says there is no such dead letter
    again = console.post("/console/dead-letters/retry", fields)
    assert again.status_code == 404
    assert "Nothing was sent" in again.text
    assert hits_once_idle(stack, receiver) == ATTEMPTS + 1


def test_the_console_offers_a_run_failed_at_its_http_step_to_try_again(stack, api, receiver):
    # Given a run failed at its HTTP step while the service it calls was down
    assert api.put_workflow("charge-console", action_workflow(receiver.url("/charges"))).status_code == 201
    receiver.script[:] = [503]
    run_id = api.start("charge-console", inputs={"orderId": "o-2"})["runId"]
    assert api.wait_status(run_id, {"failed", "completed"}, timeout_s=60)["status"] == "failed"
    console = Console(api).signed_in(api.api_key)

    # When the operator opens the run: it offers the step to try again; pressing it
    page = console.get(f"/console/runs/{wire(run_id)}")
    form = re.search(r'<form method="post" action="([^"]+/actions/charge/retry)">(.*?)</form>', page.text, re.S)
    assert form, page.text
    assert "Try charge again" in form.group(2)
    done = console.post(form.group(1), dict(HIDDEN.findall(form.group(2))))

    # Then the run goes on from there and completes, the call made once more under the same Idempotency-Key
    assert done.status_code == 200
    assert "Trying again" in done.text
    assert api.wait_status(run_id, {"completed"}, timeout_s=60)["status"] == "completed"
    hits = receiver.wait_for(2, timeout_s=60)
    assert len({h.headers["idempotency-key"] for h in hits}) == 1
    # And the run's page no longer offers it; pressing it again changes nothing
    assert "/actions/charge/retry" not in console.get(f"/console/runs/{wire(run_id)}").text
    again = console.post(form.group(1), dict(HIDDEN.findall(form.group(2))))
    assert again.status_code == 409
    assert hits_once_idle(stack, receiver) == 2


def refund_workflow(receiver: Receiver) -> dict:
    """An approval, then two HTTP calls: the refund itself, then a notice to the customer."""
    return {
        "nodes": [
            {"id": "approve", "typeId": "core.approvalGate", "config": {"title": "Refund {{inputs.orderId}}?"}},
            {"id": "refund", "typeId": "core.http", "config": {"url": receiver.url("/refunds"), "maxAttempts": 1}},
            {"id": "notify", "typeId": "core.http", "config": {"url": receiver.url("/notices"), "maxAttempts": 1}},
        ],
        "edges": [
            {"sourceNodeId": "approve", "targetNodeId": "refund"},
            {"sourceNodeId": "refund", "targetNodeId": "notify"},
        ],
        "variables": [{"name": "orderId", "type": "string"}],
    }


def test_a_failed_run_redriven_from_the_cli_completes_without_asking_again_or_refunding_twice(stack, api, receiver):
    # Given a run whose refund was approved and made, and whose notice failed (the endpoint down): it failed there
    assert api.put_workflow("refund", refund_workflow(receiver)).status_code == 201
    receiver.script[:] = [200, 503]
    run_id = api.start("refund", inputs={"orderId": "o-7"})["runId"]
    assert api.resolve(run_id, "approve", {"action": "accept"}).status_code == 200
    failed = api.wait_status(run_id, {"failed", "completed"}, timeout_s=60)
    assert (failed["status"], failed["extensions"]["interlude.run"]["failedNodeId"]) == ("failed", "notify")
    assert [h.path for h in receiver.wait_for(2, timeout_s=60)] == ["/refunds", "/notices"]

    # When the operator redrives it from the command line, following the new run
    redriven = cli(stack, "runs", "redrive", run_id, "--wait", "--timeout", "60")

    # Then a new run took up from the failed step and completed, saying so in words
    first, last = redriven.stdout.strip().splitlines()
    new_run = first.split()[1]
    assert first == f"run {new_run} redrives {run_id} from its failed step; what was decided before it stands"
    assert last == f"run {new_run} completed"
    assert "~2F" not in redriven.stdout
    # And nobody was asked again: the approval stands as decided, raised by no interrupt
    events = api.events(new_run)
    assert [e["nodeId"] for e in events if e["type"] == "node.suspended"] == []
    (decided,) = [e for e in events if e["type"] == "interrupt.resolved"]
    assert (decided["nodeId"], decided["payload"]["action"]) == ("approve", "accept")
    # And the refund was not made again: one more call, the notice; the refund's recorded outcome was reused
    hits = receiver.wait_for(3, timeout_s=60)
    assert [h.path for h in hits] == ["/refunds", "/notices", "/notices"]
    assert hits_once_idle(stack, receiver) == 3
    source_effects = {e["nodeId"]: e for e in api.call("GET", f"/runs/{wire(run_id)}/effects").json()["effects"]}
    fork_effects = {e["nodeId"]: e for e in api.call("GET", f"/runs/{wire(new_run)}/effects").json()["effects"]}
    assert fork_effects["refund"]["effectId"] == source_effects["refund"]["effectId"]
    assert fork_effects["refund"]["state"] == "completed"
    assert fork_effects["notify"]["effectId"] != source_effects["notify"]["effectId"]
    # And the two runs name each other, in the API and in `runs show`
    assert api.run(run_id)["extensions"]["interlude.run"]["forkRunIds"] == [new_run]
    ancestry = api.run(new_run)["extensions"]["interlude.run"]["ancestry"]
    assert (ancestry["sourceRunId"], ancestry["mode"], ancestry["redrive"]) == (run_id, "branch", True)
    assert f"forks     {new_run}\n" in cli(stack, "runs", "show", run_id).stdout
    shown = cli(stack, "runs", "show", new_run).stdout
    assert f"from      {run_id} (redriven from event {ancestry['fromSeq']})\n" in shown


def test_the_cli_forks_a_run_and_refuses_a_redrive_of_one_that_did_not_fail(stack, api):
    waiting = api.start("gate")["runId"]

    forked = cli(stack, "runs", "fork", waiting, "--mode", "branch", "--from-seq", "0")
    as_json = cli(stack, "runs", "fork", waiting, "--json")
    refused_redrive = cli(stack, "runs", "redrive", waiting, check=False)
    missing = cli(stack, "runs", "redrive", f"{api.tenant}/N0-such-run-xxxxxxxxxxxx", check=False)

    first, second = forked.stdout.strip().splitlines()
    new_run = first.split()[1]
    assert first == (
        f"run {new_run} forked from {waiting}, a branch at event 0: what was decided before it stands, the rest runs anew"
    )
    assert second == "it is waiting for a decision (`--wait` follows it)"
    answer = json.loads(as_json.stdout)
    assert (answer["sourceRunId"], answer["mode"], answer["fromSeq"], answer["status"]) == (
        waiting, "replay", 0, "waiting-approval",
    )
    assert refused_redrive.returncode == 1
    assert refused_redrive.stderr.strip().startswith("interlude: 409 run_state_conflict")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"interlude: no run {api.tenant}/N0-such-run-xxxxxxxxxxxx in tenant {api.tenant}"


def test_a_run_failed_at_a_business_keyed_call_redriven_calls_again_under_the_same_key(api, receiver):
    # Given a run failed at a call keyed by its business identity (effectKey): its effect record says failed
    keyed = action_workflow(receiver.url("/keyed-charges"))
    keyed["nodes"][0]["config"]["effectKey"] = "charge-{{inputs.orderId}}"
    assert api.put_workflow("keyed-charge", keyed).status_code == 201
    receiver.script[:] = [503]
    run_id = api.start("keyed-charge", inputs={"orderId": f"o-{uuid.uuid4().hex[:8]}"})["runId"]
    assert api.wait_status(run_id, {"failed", "completed"}, timeout_s=60)["status"] == "failed"

    # When it is redriven
    got = api.call("POST", f"/runs/{wire(run_id)}:redrive")

    # Then the same effect is tried again (reopened, as a retry-action would), not its failure landed again: the
    # new run completes, the call made once more under the same Idempotency-Key
    assert got.status_code == 201, got.text
    new_run = got.json()["runId"]
    assert api.wait_status(new_run, {"completed", "failed"}, timeout_s=60)["status"] == "completed"
    hits = receiver.wait_for(2, timeout_s=60)
    assert [h.path for h in hits] == ["/keyed-charges", "/keyed-charges"]
    assert hits[0].headers["idempotency-key"] == hits[1].headers["idempotency-key"]
