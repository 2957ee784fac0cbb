"""CDK app entry: `python app.py` synthesizes one Interlude stack into cdk.out (offline, no AWS calls).

Context (-c key=value), each optional:
  stackName      default Interlude; also names the deployment (secret prefixes, alarms, dashboard)
  layerDir       a prebuilt layer (`make layer`); without it the layer is built during synthesis
  logLevel       default INFO
  domainName, certificateArn        the API under your own name (an ACM certificate in the stack's region)
  alarmTopicArn                     an existing SNS topic for every alarm (default: a topic is created)
  accountConcurrencyQuota           the account's Lambda concurrency quota: wiring's reservations are made only
                                    when it is stated and can hold them (default: none, as a fresh account needs)
  existingTableName, existingTableStreamArn, existingEntriesTableName
                                    run on restored tables (docs/operations.md, "Restore")
Everything else is a prop of the Interlude construct: a deployment that needs more builds its own app
(examples/customer-app).
"""

from __future__ import annotations

import json
import os

from aws_cdk import App
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_sns as sns

from interlude_cdk import CustomDomain, ExistingTable, InterludeStack, apply_checks
from interlude_cdk.layer import PROJECT_ROOT, choose_layer_dir

DEFAULT_STACK_NAME = "Interlude"


def build_app(context: dict | None = None, outdir: str | None = None) -> tuple[App, InterludeStack]:
    # The CDK CLI hands cdk.json's context (the feature flags) to the app itself; `python app.py` and the tests
    # read it here, so every synthesis of this app uses the same flags.
    flags = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    app = App(context={**flags, **(context or {})}, outdir=outdir, analytics_reporting=False)
    stack = InterludeStack(app, app.node.try_get_context("stackName") or DEFAULT_STACK_NAME)
    stack.build(**_props_from_context(stack))
    apply_checks(app)
    return app, stack


def _props_from_context(stack: InterludeStack) -> dict:
    context = stack.node.try_get_context
    props: dict = {"layer_dir": choose_layer_dir(stack), "log_level": context("logLevel") or "INFO"}
    if context("domainName"):
        if not context("certificateArn"):
            raise ValueError("-c domainName needs -c certificateArn: an ACM certificate for it in the stack's region")
        certificate = acm.Certificate.from_certificate_arn(stack, "Certificate", context("certificateArn"))
        props["domain"] = CustomDomain(domain_name=context("domainName"), certificate=certificate)
    if context("alarmTopicArn"):
        props["alarm_topic"] = sns.Topic.from_topic_arn(stack, "AlarmTopic", context("alarmTopicArn"))
    if context("accountConcurrencyQuota"):
        quota = str(context("accountConcurrencyQuota"))
        # As the CLI passes it: text. Anything but digits reaches the construct as it is, which refuses it by name.
        props["account_concurrency_quota"] = int(quota) if quota.isdigit() else quota
    if context("existingTableName"):
        props["existing_table"] = ExistingTable(
            table_name=context("existingTableName"),
            stream_arn=context("existingTableStreamArn"),
            entries_table_name=context("existingEntriesTableName"),
        )
    return props


if __name__ == "__main__":
    # The CDK CLI passes CDK_OUTDIR; a bare `python app.py` would otherwise synthesize into a temp dir.
    build_app(outdir=None if "CDK_OUTDIR" in os.environ else str(PROJECT_ROOT / "cdk.out"))[0].synth()
