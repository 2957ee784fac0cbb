"""`interlude preflight`: what would stop a first deploy, each finding from the answer AWS documents."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from interlude.cli import preflight
from interlude.cli.main import main
from interlude.cli.preflight import Finding, TemplateFacts

FACTS = TemplateFacts(
    resources=226,
    size_bytes=197_170,
    reserved_concurrency={"DispatchFn": 10, "TimeoutsFn": 5, "ActionsFn": 10},
    bootstrap_parameter="/cdk-bootstrap/hnb659fds/version",
    min_bootstrap_version=6,
    from_addresses=("approvals@example.com",),
)


def settings(quota: int, unreserved: int | None = None) -> dict:
    return {"AccountLimit": {"ConcurrentExecutions": quota, "UnreservedConcurrentExecutions": unreserved or quota}}


def test_a_new_accounts_quota_of_ten_cannot_hold_the_reserved_concurrency():
    found = preflight.check_concurrency(settings(10), FACTS)

    assert found.status == "fail"
    assert "reserves 25" in found.detail
    assert "L-B99A9384" in found.fix
    assert "reserved_concurrency" in found.fix


def test_reservations_fit_when_a_hundred_stay_unreserved():
    assert preflight.check_concurrency(settings(1000, 125), FACTS).status == "ok"
    assert preflight.check_concurrency(settings(1000, 124), FACTS).status == "fail"


def test_without_reservations_a_small_quota_deploys_with_a_warning():
    unreserved = TemplateFacts(**{**FACTS.__dict__, "reserved_concurrency": {}})

    assert preflight.check_concurrency(settings(10), unreserved).status == "warn"
    assert preflight.check_concurrency(settings(1000), unreserved).status == "ok"


def test_ses_sandbox_warns_and_names_production_access():
    found = preflight.check_ses_account({"ProductionAccessEnabled": False, "SendingEnabled": True})

    assert found.status == "warn"
    assert "production access" in found.fix
    assert preflight.check_ses_account({"ProductionAccessEnabled": True, "SendingEnabled": True}).status == "ok"
    assert preflight.check_ses_account({"ProductionAccessEnabled": True, "SendingEnabled": False}).status == "fail"


def test_an_unverified_or_missing_from_identity_blocks():
    assert preflight.check_ses_identity("a@example.com", None).status == "fail"
    assert preflight.check_ses_identity("a@example.com", {"VerifiedForSendingStatus": False}).status == "fail"
    assert preflight.check_ses_identity("a@example.com", {"VerifiedForSendingStatus": True}).status == "ok"
    assert preflight.check_ses_identity("a@example.com", {"VerificationStatus": "PENDING"}).status == "fail"
    assert preflight.check_ses_identity("a@example.com", {"VerificationStatus": "SUCCESS"}).status == "ok"


def test_bootstrap_version_must_reach_what_the_template_requires():
    parameter = FACTS.bootstrap_parameter or ""
    assert preflight.check_bootstrap(None, FACTS, parameter).status == "fail"
    assert preflight.check_bootstrap("5", FACTS, parameter).status == "fail"
    assert preflight.check_bootstrap("30", FACTS, parameter).status == "ok"


def test_a_rolled_back_first_deploy_must_be_deleted_before_the_next():
    found = preflight.check_stack("Interlude", "ROLLBACK_COMPLETE")

    assert found.status == "fail"
    assert "delete-stack" in found.fix
    assert preflight.check_stack("Interlude", None).status == "ok"
    assert preflight.check_stack("Interlude", "UPDATE_IN_PROGRESS").status == "warn"


def test_template_facts_read_reservations_bootstrap_rule_and_sender():
    template = {
        "Parameters": {"BootstrapVersion": {"Default": "/cdk-bootstrap/intrlude1/version"}},
        "Rules": {
            "CheckBootstrapVersion": {
                "Assertions": [{"Assert": {"Fn::Not": [{"Fn::Contains": [["1", "2", "3", "4", "5"], {"Ref": "BootstrapVersion"}]}]}}]
            }
        },
        "Resources": {
            "Api": {"Type": "AWS::Lambda::Function", "Properties": {}},
            "Notify": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"ReservedConcurrentExecutions": 3, "Environment": {"Variables": {"SES_FROM_ADDRESS": "x@y.z"}}},
            },
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        },
    }

    facts = preflight.template_facts(template, 1234)

    assert facts.resources == 3
    assert facts.reserved_concurrency == {"Notify": 3}
    assert facts.bootstrap_parameter == "/cdk-bootstrap/intrlude1/version"
    assert facts.min_bootstrap_version == 6
    assert facts.from_addresses == ("x@y.z",)


def test_the_project_node_is_new_enough_for_the_cdk_cli():
    checkout = Path(__file__).resolve().parents[2]
    node = preflight.find_node(checkout)
    if node is None or not (checkout / "node_modules").is_dir():
        pytest.skip("make node-deps has not run (make test runs it first)")

    assert preflight.check_node(node).status == "ok", "make node-deps should install Node.js 22 first on make's PATH"


def test_an_old_node_is_refused_with_what_to_run(tmp_path):
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v20.20.2\n")
    old.chmod(0o755)

    found = preflight.check_node(str(old))

    assert found.status == "fail"
    assert "v20.20.2" in found.detail
    assert "make node-deps" in found.fix
    assert preflight.check_node(None).status == "fail"


class NewAccount(preflight.Account):
    """moto's account, with the two reads moto does not implement (Lambda GetAccountSettings, SES v2 GetAccount)
    answered in the shape AWS documents for them."""

    def __init__(self, lambda_settings: dict, ses_account: dict) -> None:
        super().__init__(boto3.session.Session(region_name="us-east-1"))
        self.answers = (lambda_settings, ses_account)

    def lambda_settings(self) -> dict:
        return self.answers[0]

    def ses_account(self) -> dict:
        return self.answers[1]


@pytest.fixture
def aws(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


def args_for(tmp_path: Path, template: dict | None) -> argparse.Namespace:
    if template is not None:
        (tmp_path / "cdk.out").mkdir()
        (tmp_path / "cdk.out" / "Interlude.template.json").write_text(json.dumps(template))
    return argparse.Namespace(stack="Interlude", template=None, checkout=str(tmp_path), offline=False)


TEMPLATE = {
    "Parameters": {"BootstrapVersion": {"Default": "/cdk-bootstrap/hnb659fds/version"}},
    "Resources": {
        "Dispatch": {"Type": "AWS::Lambda::Function", "Properties": {"ReservedConcurrentExecutions": 10}},
        "Notify": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Environment": {"Variables": {"SES_FROM_ADDRESS": "approvals@example.com"}}},
        },
    },
}


def test_a_fresh_account_is_read_and_every_blocker_named(aws, tmp_path):
    # Given a new account: quota 10, SES in the sandbox, the from-address unknown, never bootstrapped
    account = NewAccount(settings(10), {"ProductionAccessEnabled": False, "SendingEnabled": True})

    findings = {f.check: f for f in preflight.run_preflight(args_for(tmp_path, TEMPLATE), account)}

    assert findings["lambda concurrency"].status == "fail"
    assert findings["ses account"].status == "warn"
    assert findings["ses identity"].status == "fail"
    assert findings["cdk bootstrap"].status == "fail"
    assert findings["stack"].status == "ok"  # not deployed yet: a first deploy


def test_a_ready_account_passes_its_account_checks(aws, tmp_path):
    boto3.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    boto3.client("sesv2").create_email_identity(EmailIdentity="example.com")
    account = NewAccount(settings(1000), {"ProductionAccessEnabled": True, "SendingEnabled": True})

    findings = {f.check: f for f in preflight.run_preflight(args_for(tmp_path, TEMPLATE), account)}

    assert findings["lambda concurrency"].status == "ok"
    assert findings["ses account"].status == "ok"
    assert findings["cdk bootstrap"].status == "ok"
    # moto verifies a domain identity as soon as it is created (VerificationStatus SUCCESS); the domain covers the address
    assert findings["ses identity"].status == "ok"


def test_offline_makes_no_aws_call_and_says_what_is_missing(tmp_path, capsys):
    code = main(["preflight", "--checkout", str(tmp_path), "--offline"])

    out = capsys.readouterr().out
    assert code == 1  # no node_modules here: pyodide is missing
    assert "pyodide" in out
    assert "make node-deps" in out
    assert "make synth" in out  # no template yet
    assert "lambda concurrency" not in out


def test_findings_print_a_fix_only_where_something_is_to_be_done(capsys):
    preflight.print_findings([Finding("a", "ok", "fine", "never shown"), Finding("bb", "fail", "broken", "do this")])

    out = capsys.readouterr().out
    assert "never shown" not in out
    assert "→ do this" in out
    assert "FAIL" in out
