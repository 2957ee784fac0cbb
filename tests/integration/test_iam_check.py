"""The suite's IAM check itself (issue 25, item 2): a real call recorded in moto and evaluated against a role, the
rules of AWS's policy evaluation it relies on, and what it reports. The roles here are small templates in the
shapes the construct synthesizes; the check proper evaluates the synthesized ones (tests/support/iam_plugin.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from interlude import sdk_clients, wiring
from interlude.composition import Services
from interlude.domain.models.requests import CreateKeyRequest
from interlude.local import lambda_runtime
from interlude.rules import audit as rules
from interlude.store.facade import Store
from interlude.store.provisioning import create_tables, entries_table_beside
from tests.integration.conftest import signed_in
from tests.support.aws_calls import Recorder
from tests.support.iam_check import SIMULATOR_PACKAGE, Deployment, check, read_records, summary_lines

pytestmark = pytest.mark.skipif(not SIMULATOR_PACKAGE.exists(), reason="the IAM simulator: `make node-deps`")

TABLE = "interlude-iam-check"
ENTRIES_TABLE = entries_table_beside(TABLE)
TABLE_ARN = {"Fn::GetAtt": ["Table", "Arn"]}
INDEX_ARN = {"Fn::Join": ["", [TABLE_ARN, f"/index/{wiring.INBOX_INDEX.name}"]]}
APPEND_ONLY = {
    "Effect": "Deny",
    "Action": list(wiring.APPEND_ONLY_DENIED_ACTIONS),
    "Resource": TABLE_ARN,
    "Condition": {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": list(wiring.APPEND_ONLY_PARTITIONS)}},
}


def template(function: str, statements: list[dict[str, Any]], environment: dict[str, Any]) -> Deployment:
    """One function with one role, in the construct's shapes: the table grants inline, the rest attached."""
    table_actions = [s for s in statements if s.get("Resource") == [TABLE_ARN, INDEX_ARN] or s is APPEND_ONLY]
    attached = [s for s in statements if s not in table_actions]
    resources: dict[str, Any] = {
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        "EntriesTable": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        "AuditKey": {"Type": "AWS::SecretsManager::Secret", "Properties": {}},
        "Group": {"Type": "AWS::Scheduler::ScheduleGroup", "Properties": {}},
        "SchedulerRole": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {}},
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {"Policies": [{"PolicyName": "Table", "PolicyDocument": {"Statement": table_actions}}]},
        },
        "RolePolicy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument": {"Statement": attached}},
        },
        "Function": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}, "Environment": {"Variables": environment}},
        },
    }
    return Deployment(
        {
            "name": "small",
            "template": {"Resources": resources},
            "functions": {function: "Function"},
            "region": "eu-west-1",
            "account": "111111111111",
        }
    )


def table_grant(actions) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": sorted(actions), "Resource": [TABLE_ARN, INDEX_ARN]}


def timeouts(without: str | None = None) -> Deployment:
    """The timeouts function's role as wiring declares it (its table actions and the audit key), less `without`."""
    actions = [a for a in wiring.function("timeouts").table_actions if a != without]
    key = {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": {"Ref": "AuditKey"}}
    environment = {"TABLE_NAME": {"Ref": "Table"}, wiring.AUDIT_KEY_SECRET.env: {"Ref": "AuditKey"}}
    return template("timeouts", [table_grant(actions), APPEND_ONLY, key], environment)


@pytest.fixture(scope="module")
def audit_sweep(tmp_path_factory) -> tuple[list[dict[str, Any]], dict[str, set[str]]]:
    """What the timeouts function's audit sweep calls when it checkpoints a quiet chain (recorded for real)."""
    from interlude.adapters.audit_key import ensure_signing_key

    directory = tmp_path_factory.mktemp("calls")
    recorder = Recorder(directory)
    with pytest.MonkeyPatch.context() as env, mock_aws():
        env.setenv(wiring.TABLE_NAME_ENV, TABLE)
        env.setenv(wiring.ENTRIES_TABLE_NAME_ENV, ENTRIES_TABLE)
        env.setenv(wiring.AUDIT_KEY_SECRET.env, "audit-key-iam-check")
        env.setattr(wiring, "AUDIT_CHAINS", 1)
        env.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", wiring.AUDIT_CHECKPOINT_SWEEP.every_s)
        env.setattr(rules, "MARKER_KEEP_SECONDS", 0)  # the chain leaves the index in the same sweep
        lambda_runtime.fresh_instances()
        create_tables(boto3.client("dynamodb"), TABLE, ENTRIES_TABLE)
        ensure_signing_key("audit-key-iam-check")
        services = Services(Store(TABLE, ENTRIES_TABLE))
        services.keys.create_key(signed_in(services), CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
        session = sdk_clients.session()
        session.register("before-parameter-build", recorder.on_call)
        try:
            assert lambda_runtime.invoke("timeouts", dict(wiring.AUDIT_CHECKPOINT_SWEEP.input)) == {"checkpoints": 1}
        finally:
            session.unregister("before-parameter-build", recorder.on_call)
            lambda_runtime.fresh_instances()
    return read_records(directory)


def test_the_audit_sweep_is_allowed_by_wirings_grants_and_denied_without_delete_item(audit_sweep):
    calls, reach = audit_sweep
    (unmark,) = [c for c in calls if c["action"] == "dynamodb:DeleteItem"]
    assert (unmark["function"], unmark["call"]) == ("timeouts", "dynamodb.TransactWriteItems")

    assert check([timeouts()], calls, reach).denials == []

    report = check([timeouts(without="dynamodb:DeleteItem")], calls, reach)
    (denial,) = report.denials
    assert (denial.function, denial.action) == ("timeouts", "dynamodb:DeleteItem")
    assert denial.resource == "arn:aws:dynamodb:eu-west-1:111111111111:table/Table"
    assert denial.reason == "ImplicitlyDenied"
    line = denial.describe()
    assert "timeouts may not dynamodb:DeleteItem on arn:aws:dynamodb:eu-west-1:111111111111:table/Table" in line
    assert "call dynamodb.TransactWriteItems" in line
    assert any(line.startswith("DENIED: timeouts may not dynamodb:DeleteItem") for line in summary_lines(report))


def request(action: str, found: dict[str, str], keys: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "function": "timeouts",
        "call": "test.Call",
        "action": action,
        "resource": found,
        **({"keys": keys} if keys else {}),
        **extra,
    }


TABLE_RESOURCE = {"kind": "table", "env": "TABLE_NAME"}
ENTRIES_RESOURCE = {"kind": "table", "env": wiring.ENTRIES_TABLE_NAME_ENV}
BOTH_TABLES = {"TABLE_NAME": {"Ref": "Table"}, wiring.ENTRIES_TABLE_NAME_ENV: {"Ref": "EntriesTable"}}


def denied(deployment: Deployment, *calls: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d.action, d.reason) for d in check([deployment], list(calls), {}).denials]


def test_an_explicit_deny_wins_over_an_allow_and_any_key_of_a_batch_brings_it_in():
    role = timeouts()
    assert denied(role, request("dynamodb:UpdateItem", TABLE_RESOURCE, ["T#t1#R#r1"])) == []
    assert denied(role, request("dynamodb:UpdateItem", TABLE_RESOURCE, ["T#t1#AUDIT#007"])) == [
        ("dynamodb:UpdateItem", "ExplicitlyDenied")
    ]
    # ForAnyValue: one audit partition among many is enough
    batch = request("dynamodb:BatchWriteItem", TABLE_RESOURCE, ["T#t1#INBOX#ANY#03", "T#t1#AUDIT#001"])
    assert denied(role, batch) == [("dynamodb:BatchWriteItem", "ExplicitlyDenied")]
    # a Put is not among the denied actions: the audit log is appended to
    assert denied(role, request("dynamodb:PutItem", TABLE_RESOURCE, ["T#t1#AUDIT#007"])) == []


def test_a_call_on_the_second_table_is_checked_against_its_arn_and_denied_without_a_grant_there():
    # Given a role granted BatchWriteItem on the first table only, and one granted it on the second table too
    first_only = template("timeouts", [table_grant(["dynamodb:BatchWriteItem"])], BOTH_TABLES)
    on_both = template(
        "timeouts",
        [
            table_grant(["dynamodb:BatchWriteItem"]),
            {"Effect": "Allow", "Action": "dynamodb:BatchWriteItem", "Resource": {"Fn::GetAtt": ["EntriesTable", "Arn"]}},
        ],
        BOTH_TABLES,
    )
    entries = request("dynamodb:BatchWriteItem", ENTRIES_RESOURCE, ["T#t1#INBOX#ANY#03"])
    # When inbox entries are written to the second table: the first table's grant does not cover it
    (denial,) = check([first_only], [entries], {}).denials
    assert (denial.action, denial.reason) == ("dynamodb:BatchWriteItem", "ImplicitlyDenied")
    assert denial.resource == "arn:aws:dynamodb:eu-west-1:111111111111:table/EntriesTable"
    # and the second table's grant does
    assert denied(on_both, entries) == []
    # while that grant gives nothing on the first
    assert denied(on_both, request("dynamodb:GetItem", TABLE_RESOURCE, ["a"])) == [
        ("dynamodb:GetItem", "ImplicitlyDenied")
    ]


def test_action_names_match_whatever_their_case_and_wildcards_match_actions():
    lowered = template(
        "timeouts",
        [{"Effect": "Allow", "Action": "DynamoDB:getitem", "Resource": TABLE_ARN}],
        {"TABLE_NAME": {"Ref": "Table"}},
    )
    assert denied(lowered, request("dynamodb:GetItem", TABLE_RESOURCE, ["a"])) == []
    starred = template(
        "timeouts",
        [{"Effect": "Allow", "Action": "dynamodb:Get*", "Resource": TABLE_ARN}],
        {"TABLE_NAME": {"Ref": "Table"}},
    )
    assert denied(starred, request("dynamodb:GetItem", TABLE_RESOURCE, ["a"])) == []
    assert denied(starred, request("dynamodb:PutItem", TABLE_RESOURCE, ["a"])) == [
        ("dynamodb:PutItem", "ImplicitlyDenied")
    ]


def test_an_index_needs_a_grant_of_its_own():
    table_only = template(
        "timeouts",
        [{"Effect": "Allow", "Action": "dynamodb:Query", "Resource": TABLE_ARN}],
        {"TABLE_NAME": {"Ref": "Table"}},
    )
    index = {**TABLE_RESOURCE, "rest": "/index/inbox"}
    assert denied(table_only, request("dynamodb:Query", TABLE_RESOURCE, ["a"])) == []
    assert denied(table_only, request("dynamodb:Query", index, ["a"])) == [("dynamodb:Query", "ImplicitlyDenied")]
    assert denied(timeouts(), request("dynamodb:Query", index, ["a"])) == []


def test_a_secret_prefix_grant_covers_the_secrets_under_it_and_nothing_beside():
    prefix = "interlude/prod/webhooks/"
    grant = {
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":secretsmanager:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    f":secret:{prefix}*",
                ],
            ]
        },
    }
    role = template("timeouts", [grant], {"WEBHOOK_SECRET_PREFIX": prefix})
    inside = {"kind": "secret", "env": "WEBHOOK_SECRET_PREFIX", "rest": "t1"}
    assert denied(role, request("secretsmanager:GetSecretValue", inside)) == []
    beside = {"kind": "secret", "name": "interlude/prod/slack/t1"}
    assert denied(role, request("secretsmanager:GetSecretValue", beside)) == [
        ("secretsmanager:GetSecretValue", "ImplicitlyDenied")
    ]


def test_a_role_is_passed_only_to_the_service_the_condition_names():
    grant = {
        "Effect": "Allow",
        "Action": "iam:PassRole",
        "Resource": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
        "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
    }
    role = template("timeouts", [grant], {"SCHEDULER_ROLE_ARN": {"Fn::GetAtt": ["SchedulerRole", "Arn"]}})
    scheduler_role = {"kind": "role", "env": "SCHEDULER_ROLE_ARN"}
    to_scheduler = request("iam:PassRole", scheduler_role, context={"iam:PassedToService": "scheduler.amazonaws.com"})
    assert denied(role, to_scheduler) == []
    to_lambda = request("iam:PassRole", scheduler_role, context={"iam:PassedToService": "lambda.amazonaws.com"})
    assert denied(role, to_lambda) == [("iam:PassRole", "ImplicitlyDenied")]


def test_a_condition_on_a_key_the_check_does_not_supply_stops_the_check():
    odd = {**table_grant(["dynamodb:GetItem"]), "Condition": {"StringEquals": {"dynamodb:Select": "ALL_ATTRIBUTES"}}}
    role = template("timeouts", [odd], {"TABLE_NAME": {"Ref": "Table"}})
    with pytest.raises(RuntimeError, match="dynamodb:select"):
        check([role], [request("dynamodb:GetItem", TABLE_RESOURCE, ["a"])], {})


def test_a_resource_the_function_cannot_find_where_deployed_is_a_denial_and_an_absent_feature_is_skipped():
    role = timeouts()
    queue = {"kind": "queue", "env": "CALLBACK_QUEUE_URL"}
    report = check([role], [request("sqs:SendMessage", queue)], {})
    assert [(d.action, d.reason) for d in report.denials] == [
        ("sqs:SendMessage", "its environment in the template sets no CALLBACK_QUEUE_URL")
    ]
    mail = request("ses:SendEmail", {"kind": "ses-identity", "env": "SES_FROM_ADDRESS"})
    report = check([role], [mail], {})
    assert (report.denials, report.not_configured) == ([], 1)


def test_a_direct_call_is_checked_against_every_function_seen_running_its_entry_point():
    call = {
        "entry": "interlude.app.audit:checkpoint_pending",
        "call": "test.Call",
        "action": "dynamodb:DeleteItem",
        "resource": TABLE_RESOURCE,
        "keys": ["T#t1#AUDITHEAD#000"],
    }
    without = timeouts(without="dynamodb:DeleteItem")
    report = check([without], [call], {"interlude.app.audit:checkpoint_pending": {"timeouts"}})
    assert [(d.function, d.action) for d in report.denials] == [("timeouts", "dynamodb:DeleteItem")]
    assert "direct call into interlude.app.audit:checkpoint_pending" in report.denials[0].describe()
    report = check([without], [call], {})
    assert report.denials == []
    assert report.unattributed == {"interlude.app.audit:checkpoint_pending": 1}


def test_grants_no_call_used_are_listed_and_lambdas_own_are_not():
    role = copy.deepcopy(timeouts())
    logs = {
        "Effect": "Allow",
        "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": {"Fn::GetAtt": ["Logs", "Arn"]},
    }
    role.resources["RolePolicy"]["Properties"]["PolicyDocument"]["Statement"].append(logs)
    report = check([role], [request("dynamodb:GetItem", TABLE_RESOURCE, ["a"])], {})
    unused = report.unused["small"]["timeouts"]
    table = "arn:aws:dynamodb:eu-west-1:111111111111:table/Table"
    assert (table, "dynamodb:GetItem") not in unused
    assert {(table, "dynamodb:DeleteItem"), (f"{table}/index/inbox", "dynamodb:GetItem")} <= unused
    assert not any(action.startswith("logs:") for _, action in unused)
    lines = summary_lines(report)
    assert "Grants no call used (small):" in lines
    assert any(line.startswith("  timeouts: ") and "dynamodb:DeleteItem" in line for line in lines)


def test_records_are_read_once_each_and_a_line_cut_short_is_left_out(tmp_path: Path):
    (tmp_path / "1.jsonl").write_text(
        '{"reach":"api","path":"interlude.app.x:f"}\n'
        '{"function":"api","action":"dynamodb:GetItem","resource":{"kind":"table"},"test":"a"}\n'
        '{"function":"api","action":"dynamodb:GetItem","resource":{"kind":"table"},"test":"b"}\n'
        '{"function":"api","action":"dyna'
    )
    calls, reach = read_records(tmp_path)
    assert [c["test"] for c in calls] == ["a"]
    assert reach == {"interlude.app.x:f": {"api"}}


def test_a_denied_call_fails_the_session_and_the_summary_names_it(tmp_path: Path, monkeypatch, audit_sweep):
    # The session's end as the plugin runs it: the calls recorded, the templates kept, one of them without the grant.
    from types import SimpleNamespace

    from tests.support import aws_calls, iam_plugin
    from tests.support.iam_templates import APPS, write

    calls, reach = audit_sweep
    records = tmp_path / "calls"
    records.mkdir()
    lines = [json.dumps(call) for call in calls] + [
        json.dumps({"reach": f, "path": p}) for p, fs in reach.items() for f in fs
    ]
    (records / "1.jsonl").write_text("\n".join(lines) + "\n")
    for name in APPS:
        role = timeouts(without="dynamodb:DeleteItem" if name == "app" else None)
        write(records / iam_plugin.TEMPLATES, {**role_export(role), "name": name})
    monkeypatch.setenv(aws_calls.LOG_DIR_ENV, str(records))
    summary: list[str] = []
    monkeypatch.setattr(iam_plugin, "_summary", summary)
    session = SimpleNamespace(config=SimpleNamespace(), exitstatus=pytest.ExitCode.OK)

    iam_plugin.pytest_sessionfinish(session, pytest.ExitCode.OK)

    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert summary[0].startswith("FAILED: ")
    (denied_line,) = [line for line in summary if line.startswith("DENIED: ")]
    assert denied_line.startswith("DENIED: timeouts may not dynamodb:DeleteItem on arn:aws:dynamodb:")
    assert "(app: ImplicitlyDenied); call dynamodb.TransactWriteItems" in denied_line
    assert not records.exists()  # the records go with the session


def role_export(deployment: Deployment) -> dict[str, Any]:
    return {
        "template": deployment.template,
        "functions": deployment.functions,
        "region": deployment.region,
        "account": deployment.account,
    }
