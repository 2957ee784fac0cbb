"""The deadline wiring in the synthesized template: schedule group, execution role, dead letters, grants."""

from __future__ import annotations

import json

from interlude import wiring
from interlude.domain import clock
from tests.infra.conftest import alarm_metrics, as_list, dimension


def _ids(synth):  # noqa: F811
    deadlines = synth.interlude.deadlines
    return {
        "group": synth.stack.get_logical_id(deadlines.group),
        "role": synth.logical_id(deadlines.role),
        "dlq": synth.logical_id(deadlines.dead_letters),
        "target": synth.function_id(wiring.SCHEDULES.target),
    }


def test_one_schedule_group_per_deployment_and_a_dead_letter_queue(synth):  # noqa: F811
    # Given the template / Then it holds exactly one schedule group (named by CloudFormation, so one per stack)
    groups = synth.of_type("AWS::Scheduler::ScheduleGroup")
    assert list(groups) == [_ids(synth)["group"]]
    assert "Name" not in (groups[_ids(synth)["group"]].get("Properties") or {})
    # And a dead-letter queue, encrypted, kept as long as wiring says
    dlq = synth.resources[_ids(synth)["dlq"]]
    assert dlq["Type"] == "AWS::SQS::Queue"
    assert dlq["Properties"]["MessageRetentionPeriod"] == wiring.SCHEDULES.dead_letter_retention_s
    assert dlq["Properties"]["SqsManagedSseEnabled"] is True


def test_the_scheduler_role_may_invoke_exactly_the_timeouts_function_and_write_its_dead_letters(synth):  # noqa: F811
    ids = _ids(synth)
    role = synth.resources[ids["role"]]["Properties"]
    # Given the execution role / Then only this account's EventBridge Scheduler, for a schedule of this
    # deployment's own group, may assume it (confused deputy: SourceAccount, and SourceArn the GROUP's ARN, as
    # Scheduler sets it: issue 25, finding 2)
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [ids["group"], "Arn"]}},
    }
    # And it carries exactly two grants: invoke the target function, send to the dead-letter queue
    statements = synth.statements_of_role(ids["role"])
    granted = sorted((a, str(r)) for s in statements for a in as_list(s["Action"]) for r in as_list(s["Resource"]))
    assert granted == sorted(
        [
            ("lambda:InvokeFunction", str({"Fn::GetAtt": [ids["target"], "Arn"]})),
            ("sqs:SendMessage", str({"Fn::GetAtt": [ids["dlq"], "Arn"]})),
        ]
    )
    assert "ManagedPolicyArns" not in role


def test_managers_get_the_schedule_environment(synth):  # noqa: F811
    ids = _ids(synth)
    expected = dict(
        zip(
            wiring.SCHEDULES.environment,
            [
                {"Ref": ids["group"]},
                {"Fn::GetAtt": [ids["target"], "Arn"]},
                {"Fn::GetAtt": [ids["role"], "Arn"]},
                {"Fn::GetAtt": [ids["dlq"], "Arn"]},
            ],
            strict=True,
        )
    )
    for spec in wiring.FUNCTIONS:
        variables = synth.env(spec.name)
        present = {k: variables[k] for k in wiring.SCHEDULES.environment if k in variables}
        assert present == (expected if spec.name in wiring.SCHEDULES.managers else {}), spec.name
        # The test clock is a local-stack feature: no deployed function may carry it.
        assert clock.CLOCK_FILE_ENV not in variables


def schedules_arn(group_id: str) -> dict:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":scheduler:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":schedule/",
                {"Ref": group_id},
                "/*",
            ],
        ]
    }


def test_only_managers_may_create_and_delete_schedules_and_pass_exactly_the_scheduler_role(synth):  # noqa: F811
    ids = _ids(synth)
    for spec in wiring.FUNCTIONS:
        statements = synth.statements(spec.name)
        scheduler = [s for s in statements if any(a.startswith("scheduler:") for a in as_list(s["Action"]))]
        passing = [s for s in statements if "iam:PassRole" in as_list(s["Action"])]
        if spec.name not in wiring.SCHEDULES.managers:
            assert scheduler == [], spec.name
            assert passing == [], spec.name
            continue
        # A listing IAM scopes to no resource (the operator surface's ListSchedules, wiring.Function.unscoped_actions)
        # stands alone, on "*"
        listing = [s for s in scheduler if s["Resource"] == "*"]
        assert [a for s in listing for a in as_list(s["Action"]) if a.startswith("scheduler:")] == [
            a for a in spec.unscoped_actions if a.startswith("scheduler:")
        ]
        # Exactly CreateSchedule/DeleteSchedule (and GetSchedule for a reader), only on the deployment's own group's
        # schedules
        (statement,) = [s for s in scheduler if s not in listing]
        reads = wiring.SCHEDULE_READ_ACTIONS if spec.name in wiring.SCHEDULE_READERS else ()
        assert sorted(as_list(statement["Action"])) == sorted([*wiring.SCHEDULE_ACTIONS, *reads])
        assert as_list(statement["Resource"]) == [schedules_arn(ids["group"])]
        # And PassRole on exactly the execution role, only towards the scheduler
        (passrole,) = passing
        assert as_list(passrole["Action"]) == ["iam:PassRole"]
        assert as_list(passrole["Resource"]) == [{"Fn::GetAtt": [ids["role"], "Arn"]}]
        assert passrole["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_the_target_function_exists_with_its_own_handler(synth):  # noqa: F811
    target = synth.resources[_ids(synth)["target"]]
    assert target["Properties"]["Handler"] == wiring.function(wiring.SCHEDULES.target).handler


def test_a_failed_deadline_invocation_lands_in_an_alarmed_queue_not_nowhere(synth):
    # Given the timeouts function, which Scheduler invokes asynchronously
    target = _ids(synth)["target"]
    failures = synth.logical_id(synth.interlude.deadlines.target_failures)
    (config,) = [
        c["Properties"]
        for c in synth.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": target}
    ]
    # Then Lambda retries as wiring says, then sends the event to the on-failure queue
    assert config["MaximumRetryAttempts"] == wiring.SCHEDULES.target_async_retries
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [failures, "Arn"]}
    # And the function may send there
    sends = {
        a
        for s in synth.statements(wiring.SCHEDULES.target)
        if {"Fn::GetAtt": [failures, "Arn"]} in as_list(s["Resource"])
        for a in as_list(s["Action"])
    }
    assert "sqs:SendMessage" in sends
    # And the queue is watched like every dead-letter queue
    assert synth.interlude.dead_letter_queues()["timeouts-failures"] is synth.interlude.deadlines.target_failures
    assert {"Fn::GetAtt": [failures, "QueueName"]} in [dimension(m, "QueueName") for _, _, m in alarm_metrics(synth)]


def test_the_audit_checkpoint_sweep_is_a_rate_schedule_in_the_group_invoking_the_timeouts_function(synth):  # noqa: F811
    ids = _ids(synth)
    # Given the template / Then the deployment's recurring schedules are the audit checkpoint sweep, every minute,
    # and the retention sweep (issue 30), every day, both in the deadlines' group
    schedules = {
        json.loads(s["Properties"]["Target"]["Input"])["sweep"]: s["Properties"]
        for s in synth.of_type("AWS::Scheduler::Schedule").values()
    }
    assert {sweep: props["ScheduleExpression"] for sweep, props in schedules.items()} == {
        "audit-checkpoints": "rate(1 minute)",
        "retention": "rate(1440 minutes)",
    }
    for props in schedules.values():
        assert props["GroupName"] == {"Ref": ids["group"]}
        assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
        # And each invokes the timeouts function through the scheduler role, its failures dead-lettered
        target = props["Target"]
        assert target["Arn"] == {"Fn::GetAtt": [ids["target"], "Arn"]}
        assert target["RoleArn"] == {"Fn::GetAtt": [ids["role"], "Arn"]}
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [ids["dlq"], "Arn"]}}
