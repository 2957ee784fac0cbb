"""Issue 3 in the stack: its routes on the HTTP API, and the table permissions its items need (nothing more).

Issue 3 adds no function, queue, schedule or secret: its items (tenant settings, credential grants, kept events,
event waiters, conversation claims) live in the one table, the inbox reads the existing inbox index, and kept
events expire through the table's TTL attribute. Closing an event waiter is an UpdateItem.
"""

from __future__ import annotations

import pytest

from interlude import wiring
from tests.infra.conftest import actions_on

ISSUE3_ROUTES = {
    ("GET", "/interrupts", "approvals:respond"),
    ("POST", "/events", "events:write"),
    ("GET", "/tenant/settings", "keys:admin"),
    ("PUT", "/tenant/settings", "keys:admin"),
    ("PUT", "/tenant/credential-grants/{provider}", "keys:admin"),
}
# Functions that commit run transitions: each writes waiters and conversation claims with them.
COMMITTERS = ("api", "dispatch", "timeouts")


def test_issue3_routes_are_declared_with_their_scopes_and_served_by_the_api(synth):  # noqa: F811
    declared = {(r.method, r.path, r.scope) for r in wiring.ROUTES}
    assert declared >= ISSUE3_ROUTES
    route_keys = {r["Properties"]["RouteKey"] for r in synth.of_type("AWS::ApiGatewayV2::Route").values()}
    assert {f"{m} {p}" for m, p, _ in ISSUE3_ROUTES} <= route_keys
    mutating = {(r.method, r.path) for r in wiring.ROUTES if r.mutating}
    assert {
        ("POST", "/events"),
        ("PUT", "/tenant/settings"),
        ("PUT", "/tenant/credential-grants/{provider}"),
    } <= mutating


@pytest.mark.parametrize("name", [n for n in COMMITTERS if n in {f.name for f in wiring.FUNCTIONS}])
def test_committers_hold_what_waiters_claims_and_their_deletes_need(synth, name):  # noqa: F811
    # Each committer also deletes: the api (idempotency rows, directory entries), dispatch (a cancelled task's ready
    # entry), timeouts (the audit sweep's pending-chain marker, in its checkpoint's transaction). Each also reads
    # the delegations of a gate's approvers in batches (the inbox, notifications, reminders). Replaying the suite's
    # AWS calls against the roles found dispatch and timeouts without them (issue 25, findings 3-6).
    actions = actions_on(synth.statements(name), {"Fn::GetAtt": [synth.table_id(), "Arn"]})
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"} <= actions


def test_the_api_queries_the_inbox_index_and_the_outbox_queries_kept_events(synth):  # noqa: F811
    table_arn = {"Fn::GetAtt": [synth.table_id(), "Arn"]}
    index_arn = {"Fn::Join": ["", [table_arn, f"/index/{wiring.INBOX_INDEX.name}"]]}
    assert "dynamodb:Query" in actions_on(synth.statements("api"), index_arn)
    assert "dynamodb:Query" in actions_on(synth.statements("dispatch"), table_arn)


def test_kept_events_expire_through_the_tables_ttl_and_the_inbox_index_projects_everything(synth):  # noqa: F811
    props = synth.table(synth.table_id())["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": wiring.TTL_ATTRIBUTE, "Enabled": True}
    inbox = next(i for i in props["GlobalSecondaryIndexes"] if i["IndexName"] == wiring.INBOX_INDEX.name)
    assert inbox["Projection"] == {"ProjectionType": "ALL"}
