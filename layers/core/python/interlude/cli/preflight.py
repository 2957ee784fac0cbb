"""`interlude preflight`: what would stop a first deploy into this account, found before CloudFormation finds it.

Offline, it checks the build tools (Node.js for the CDK CLI, pyodide for the layers' bytecode) and the synthesized
template (`cdk.out/STACK.template.json`: CloudFormation's limits, the concurrency it reserves, the bootstrap
version it asks for, the SES identity it mails from). With AWS credentials it adds read-only calls: the account's
Lambda concurrency quota, SES's sandbox and the from-identity, the CDK bootstrap version, and the stack's state.
Nothing is created or changed. docs/operations.md, "First deploy", walks through what each failure means.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

# The CDK CLI supports Node.js releases in active or maintenance LTS; 20 reached its end of life in April 2026.
MIN_NODE_MAJOR = 22
# Lambda keeps at least this much of the account's concurrency unreserved (Lambda quotas page).
UNRESERVED_FLOOR = 100
# CloudFormation quotas: resources per template, template body uploaded through S3.
MAX_RESOURCES = 500
MAX_TEMPLATE_BYTES = 1_000_000
# Service Quotas code of "Concurrent executions" (Lambda), for the increase request the failure names.
CONCURRENCY_QUOTA_CODE = "L-B99A9384"
SES_FROM_ENV = "SES_FROM_ADDRESS"

Status = Literal["ok", "warn", "fail", "skip"]
MARKS: dict[Status, str] = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    # What to do about it (empty when nothing is to be done).
    fix: str = ""


@dataclass(frozen=True)
class TemplateFacts:
    """What the account must hold for this template, read off the synthesized template."""

    resources: int
    size_bytes: int
    reserved_concurrency: dict[str, int]
    bootstrap_parameter: str | None
    min_bootstrap_version: int | None
    from_addresses: tuple[str, ...]


def template_facts(template: dict[str, Any], size_bytes: int) -> TemplateFacts:
    resources = template.get("Resources", {})
    reserved = {
        logical: int(props["ReservedConcurrentExecutions"])
        for logical, resource in resources.items()
        if resource.get("Type") == "AWS::Lambda::Function"
        and isinstance(props := resource.get("Properties", {}), dict)
        and isinstance(props.get("ReservedConcurrentExecutions"), int)
    }
    senders = sorted(
        {
            value
            for resource in resources.values()
            if resource.get("Type") == "AWS::Lambda::Function"
            and isinstance(value := resource.get("Properties", {}).get("Environment", {}).get("Variables", {}).get(SES_FROM_ENV), str)
        }
    )
    parameter = template.get("Parameters", {}).get("BootstrapVersion", {}).get("Default")
    return TemplateFacts(
        resources=len(resources),
        size_bytes=size_bytes,
        reserved_concurrency=reserved,
        bootstrap_parameter=parameter if isinstance(parameter, str) else None,
        min_bootstrap_version=_min_bootstrap_version(template),
        from_addresses=tuple(senders),
    )


def _min_bootstrap_version(template: dict[str, Any]) -> int | None:
    """The lowest version CDK's CheckBootstrapVersion rule lets through (it lists the refused ones)."""
    for assertion in template.get("Rules", {}).get("CheckBootstrapVersion", {}).get("Assertions", []):
        refused = assertion.get("Assert", {}).get("Fn::Not", [{}])[0].get("Fn::Contains", [[]])[0]
        versions = [int(v) for v in refused if isinstance(v, str) and v.isdigit()]
        if versions:
            return max(versions) + 1
    return None


# -- offline checks ------------------------------------------------------------------------------------------


def check_node(node: str | None) -> Finding:
    if node is None:
        return Finding("node", "fail", "no Node.js found", "make node-deps (installs Node.js 22 from the npm registry)")
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return Finding("node", "fail", f"{node} does not run: {error}", "make node-deps")
    found = re.match(r"v(\d+)\.", version)
    if not found or int(found.group(1)) < MIN_NODE_MAJOR:
        return Finding(
            "node",
            "fail",
            f"{node} is {version or 'of unknown version'}; the CDK CLI needs Node.js {MIN_NODE_MAJOR} or newer",
            "make node-deps (installs Node.js 22 from the npm registry into node_modules/.bin)",
        )
    return Finding("node", "ok", f"Node.js {version} ({node})")


def check_pyodide(checkout: Path) -> Finding:
    package = checkout / "node_modules" / "pyodide" / "package.json"
    if not package.is_file():
        return Finding(
            "pyodide",
            "fail",
            "pyodide is not installed: the layers' bytecode cannot be compiled for the functions' Python",
            "make node-deps (or, in your own CDK app: npm install pyodide@314.0.8)",
        )
    version = json.loads(package.read_text()).get("version", "?")
    return Finding("pyodide", "ok", f"pyodide {version}")


def check_template(facts: TemplateFacts) -> Iterator[Finding]:
    yield Finding(
        "template resources",
        "ok" if facts.resources <= MAX_RESOURCES else "fail",
        f"{facts.resources} of CloudFormation's {MAX_RESOURCES} resources per stack",
        "" if facts.resources <= MAX_RESOURCES else "split the stack",
    )
    yield Finding(
        "template size",
        "ok" if facts.size_bytes <= MAX_TEMPLATE_BYTES else "fail",
        f"{facts.size_bytes:,} bytes of CloudFormation's {MAX_TEMPLATE_BYTES:,} (uploaded through the bootstrap bucket)",
    )


# -- checks that read the account ----------------------------------------------------------------------------


def check_concurrency(settings: dict[str, Any], facts: TemplateFacts | None) -> Finding:
    """`settings`: Lambda's GetAccountSettings answer."""
    quota = int(settings.get("AccountLimit", {}).get("ConcurrentExecutions", 0))
    unreserved = int(settings.get("AccountLimit", {}).get("UnreservedConcurrentExecutions", quota))
    wanted = sum(facts.reserved_concurrency.values()) if facts else 0
    left = unreserved - wanted
    detail = f"account quota {quota}, unreserved now {unreserved}; the stack reserves {wanted}"
    if wanted == 0 and quota < UNRESERVED_FLOOR * 10:
        # Deploys, but a new account's quota (as low as 10) caps every function together: held API requests can
        # starve dispatch. Worth raising before production traffic.
        return Finding(
            "lambda concurrency",
            "warn",
            f"{detail}: it deploys, but all functions share {quota} concurrent executions",
            f"ask for a higher quota (Service Quotas, Lambda, {CONCURRENCY_QUOTA_CODE}), then reserve concurrency",
        )
    if wanted == 0 or left >= UNRESERVED_FLOOR:
        return Finding("lambda concurrency", "ok", detail)
    return Finding(
        "lambda concurrency",
        "fail",
        f"{detail}: Lambda must keep {UNRESERVED_FLOOR} unreserved, so creating the functions would fail",
        f"ask for a higher quota (Service Quotas, Lambda, {CONCURRENCY_QUOTA_CODE}: 1,000 is the usual default), or "
        "deploy without reservations (InterludeProps reserved_concurrency: docs/operations.md, First deploy)",
    )


def check_ses_account(account: dict[str, Any]) -> Finding:
    """`account`: SES v2 GetAccount's answer."""
    if not account.get("SendingEnabled", True):
        return Finding("ses account", "fail", "sending is paused for this account and region", "see SES's console, Reputation")
    if not account.get("ProductionAccessEnabled", False):
        return Finding(
            "ses account",
            "warn",
            "SES is in the sandbox here: mail reaches verified addresses only, 200 a day",
            "request production access (SES console, Account dashboard) before approvers rely on e-mail",
        )
    return Finding("ses account", "ok", "production access")


def check_ses_identity(address: str, identity: dict[str, Any] | None) -> Finding:
    """`identity`: GetEmailIdentity's answer for the address, else for its domain; None when neither exists."""
    if identity is None:
        return Finding(
            "ses identity",
            "fail",
            f"neither {address} nor its domain is an SES identity in this region",
            f"aws sesv2 create-email-identity --email-identity {address.rsplit('@', 1)[-1]} (then publish its DKIM records)",
        )
    verified = identity.get("VerifiedForSendingStatus") is True or identity.get("VerificationStatus") == "SUCCESS"
    if not verified:
        return Finding("ses identity", "fail", f"{address}: identity not verified yet", "finish its verification (DNS)")
    return Finding("ses identity", "ok", f"{address}: verified for sending")


def check_bootstrap(version: str | None, facts: TemplateFacts | None, parameter: str) -> Finding:
    needed = facts.min_bootstrap_version if facts and facts.min_bootstrap_version else 6
    if version is None:
        return Finding(
            "cdk bootstrap",
            "fail",
            f"no {parameter}: this account and region are not bootstrapped (with this qualifier)",
            "npx aws-cdk bootstrap (docs/operations.md, Bootstrap)",
        )
    if not version.isdigit() or int(version) < needed:
        return Finding("cdk bootstrap", "fail", f"bootstrap version {version}; the template needs {needed} or newer", "bootstrap again")
    return Finding("cdk bootstrap", "ok", f"bootstrap version {version} (needs {needed})")


def check_stack(stack: str, status: str | None) -> Finding:
    if status is None:
        return Finding("stack", "ok", f"{stack} does not exist yet: this is a first deploy")
    if status == "ROLLBACK_COMPLETE":
        return Finding(
            "stack",
            "fail",
            f"{stack} is in ROLLBACK_COMPLETE (a first deploy rolled back): CloudFormation cannot update it",
            f"aws cloudformation delete-stack --stack-name {stack}, then deploy again",
        )
    if status.endswith("_IN_PROGRESS"):
        return Finding("stack", "warn", f"{stack} is {status}", "wait for it to finish")
    return Finding("stack", "ok", f"{stack} is {status}")


class Account:
    """The read-only calls preflight makes, each answering None where AWS says the thing does not exist."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def lambda_settings(self) -> dict[str, Any]:
        return dict(self.session.client("lambda").get_account_settings())

    def ses_account(self) -> dict[str, Any]:
        return dict(self.session.client("sesv2").get_account())

    def ses_identity(self, address: str) -> dict[str, Any] | None:
        client = self.session.client("sesv2")
        for identity in (address, address.rsplit("@", 1)[-1]):
            try:
                return dict(client.get_email_identity(EmailIdentity=identity))
            except client.exceptions.NotFoundException:
                continue
        return None

    def parameter(self, name: str) -> str | None:
        client = self.session.client("ssm")
        try:
            return str(client.get_parameter(Name=name)["Parameter"]["Value"])
        except client.exceptions.ParameterNotFound:
            return None

    def stack_status(self, stack: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            (found,) = self.session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
        except ClientError as error:
            if "does not exist" in str(error):
                return None
            raise
        return str(found["StackStatus"])


def account_findings(account: Account, stack: str, facts: TemplateFacts | None) -> Iterator[Finding]:
    yield _guarded("lambda concurrency", lambda: check_concurrency(account.lambda_settings(), facts))
    if facts is not None and facts.from_addresses:
        yield _guarded("ses account", lambda: check_ses_account(account.ses_account()))
        for address in facts.from_addresses:
            yield _guarded("ses identity", partial(_identity_finding, account, address))
    parameter = (facts.bootstrap_parameter if facts else None) or "/cdk-bootstrap/hnb659fds/version"
    yield _guarded("cdk bootstrap", lambda: check_bootstrap(account.parameter(parameter), facts, parameter))
    yield _guarded("stack", lambda: check_stack(stack, account.stack_status(stack)))


def _identity_finding(account: Account, address: str) -> Finding:
    return check_ses_identity(address, account.ses_identity(address))


def _guarded(check: str, run: Callable[[], Finding]) -> Finding:
    """A refused read (say, a role without ssm:GetParameter) is one warning, not the end of preflight."""
    from interlude.cli.deployment import aws_error_line

    try:
        return run()
    except Exception as error:  # noqa: BLE001 - named in the report, never a traceback
        line = aws_error_line(error)
        if line is None:
            raise
        return Finding(check, "warn", f"could not check: {line}", "run preflight with a role that may read it")


# -- the command ---------------------------------------------------------------------------------------------


def find_node(checkout: Path) -> str | None:
    """The project's own Node.js (make node-deps) before the machine's."""
    local = checkout / "node_modules" / ".bin" / "node"
    return str(local) if local.exists() else shutil.which("node")


def run_preflight(args: argparse.Namespace, account: Account | None = None) -> list[Finding]:
    checkout = Path(args.checkout)
    findings = [check_node(find_node(checkout)), check_pyodide(checkout)]
    template_path = Path(args.template) if args.template else checkout / "cdk.out" / f"{args.stack}.template.json"
    facts: TemplateFacts | None = None
    if template_path.is_file():
        body = template_path.read_bytes()
        facts = template_facts(json.loads(body), len(body))
        findings.extend(check_template(facts))
    else:
        findings.append(Finding("template", "skip", f"no {template_path}", "make synth STACK=... (then run preflight again)"))
    if args.offline:
        return findings
    if account is None:
        import boto3

        session = boto3.session.Session()
        if session.get_credentials() is None:
            findings.append(Finding("account", "skip", "no AWS credentials: the account was not read", "set AWS_PROFILE"))
            return findings
        account = Account(session)
    findings.extend(account_findings(account, args.stack, facts))
    return findings


def print_findings(findings: list[Finding]) -> None:
    width = max(len(f.check) for f in findings)
    for finding in findings:
        print(f"{MARKS[finding.status]}  {finding.check.ljust(width)}  {finding.detail}")
        if finding.fix and finding.status != "ok":
            print(f"      {''.ljust(width)}  → {finding.fix}")


def preflight(args: argparse.Namespace) -> int:
    findings = run_preflight(args)
    print_findings(findings)
    failed = sum(f.status == "fail" for f in findings)
    print(f"\n{failed} blocking" if failed else "\nnothing blocks a deploy")
    return 1 if failed else 0


def add_commands(sub: Any) -> None:
    from interlude.config.local import cli_settings

    parser = sub.add_parser(
        "preflight", help="what would stop a deploy into this account (offline checks, then read-only AWS calls)"
    )
    parser.add_argument("--stack", default=cli_settings().stack or "Interlude", help="the stack to deploy")
    parser.add_argument("--template", help="a synthesized template (default: cdk.out/STACK.template.json)")
    parser.add_argument("--checkout", default=".", help="the directory holding node_modules and cdk.out")
    parser.add_argument("--offline", action="store_true", help="no AWS calls, even with credentials")
    parser.set_defaults(func=preflight, in_process=False)
