"""The production CLI against a deployment (`--stack NAME`): it needs neither moto nor the dev environment, finds
the deployment's parts through the stack's outputs, and says in one line what is missing, never a traceback.

Each command runs in a subprocess where `import moto` fails; the deployment is a moto server on loopback that
holds a CloudFormation stack with Interlude's outputs (reached through AWS_ENDPOINT_URL, as any endpoint).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest
from moto.server import ThreadedMotoServer

from interlude import wiring

# moto made unimportable, then the CLI's own entry point.
GUARDED_CLI = "import sys; sys.modules['moto'] = None; from interlude.cli.main import main; sys.exit(main(sys.argv[1:]))"
PREFIX = "interlude/Prod/webhooks/"
RING = "prod-token-ring"
TAGS = {"interlude:deployment": "Prod", "owner": "approvals-team"}


def run_cli(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the CLI; return the process and the modules it imported (from -X importtime)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", GUARDED_CLI, *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    done.stderr = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    return done, imported


def assert_one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("interlude: ")
    for fragment in fragments:
        assert fragment in line


# A world of its own: the CLI runs in processes of its own, which reach moto through a server.
@pytest.fixture(scope="module")
def aws():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    clients = {s: boto3.client(s, endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                               aws_access_key_id="testing", aws_secret_access_key="testing")
               for s in ("cloudformation", "secretsmanager", "kms")}  # fmt: skip
    key_arn = clients["kms"].create_key(Description="the customer's key")["KeyMetadata"]["Arn"]
    outputs = {
        wiring.OUTPUT_TABLE_NAME: "prod-table",
        wiring.OUTPUT_ENTRIES_TABLE_NAME: "prod-entries-table",
        wiring.OUTPUT_KEY_RING_SECRET: RING,
        wiring.OUTPUT_WEBHOOK_SECRET_PREFIX: PREFIX,
        wiring.OUTPUT_WEBHOOK_SECRET_TAGS: json.dumps(TAGS),
        wiring.OUTPUT_WEBHOOK_SECRET_KMS_KEY: key_arn,
    }
    for name, declared in (("Prod", outputs), ("Old", {wiring.OUTPUT_TABLE_NAME: "old-table"})):
        template = {
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {key: {"Value": value} for key, value in declared.items()},
        }
        clients["cloudformation"].create_stack(StackName=name, TemplateBody=json.dumps(template))
    clients["secretsmanager"].create_secret(Name=RING, SecretString=json.dumps({"seed": "s" * 44}))
    yield env
    server.stop()


def test_without_a_region_the_cli_says_so_in_one_line_without_moto_or_the_local_stack():
    done, imported = run_cli("keys", "create", "--stack", "Prod", "--tenant", "acme", "--subject", "ops", "--scopes", "all")
    assert_one_line_error(done, "no AWS region", "AWS_DEFAULT_REGION")
    assert "Traceback" not in done.stderr
    assert not [m for m in imported if m == "moto" or m.startswith(("moto.", "interlude.local"))]


def test_without_credentials_the_cli_says_so_in_one_line():
    done, _ = run_cli("tokens", "rotate", "--stack", "Prod", AWS_DEFAULT_REGION="us-east-1")
    assert_one_line_error(done, "no AWS credentials", "AWS_PROFILE")


def test_an_unknown_stack_is_named_with_its_region(aws):
    done, _ = run_cli("tokens", "rotate", "--stack", "Nope", **aws)
    assert_one_line_error(done, "no stack 'Nope' in us-east-1")


def test_a_stack_without_the_needed_output_says_which(aws):
    done, _ = run_cli("webhooks", "secret", "show", "--stack", "Old", "--tenant", "acme", **aws)
    assert_one_line_error(done, "stack 'Old' has no output 'WebhookSecretPrefix'")


def test_a_table_command_on_a_stack_without_the_second_table_says_so_rather_than_use_the_first(aws):
    # A stack of a release before 0.5.0 has one table: the CLI never takes the second to be the first.
    done, _ = run_cli("keys", "list", "--stack", "Old", "--tenant", "acme", **aws)
    assert_one_line_error(done, "stack 'Old' has no output 'EntriesTableName'")


def test_without_any_deployment_named_the_cli_says_how_to_name_one(aws):
    done, _ = run_cli("keys", "create", "--tenant", "acme", "--subject", "ops", "--scopes", "all", **aws)
    assert_one_line_error(done, "--stack")


def test_tokens_rotate_finds_the_key_ring_through_the_stack(aws):
    done, imported = run_cli("tokens", "rotate", "--stack", "Prod", **aws)
    assert done.returncode == 0, done.stderr
    rotated = json.loads(done.stdout)
    assert rotated["currentKid"] in rotated["kids"]
    assert len(rotated["kids"]) == 2
    assert not [m for m in imported if m.startswith("interlude.local")]


def test_webhook_secrets_live_under_the_stacks_own_prefix(aws):
    done, _ = run_cli("webhooks", "secret", "show", "--stack", "Prod", "--tenant", "acme", **aws)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["secretName"] == f"{PREFIX}acme"
    assert shown["secret"].startswith("whsec_")


def test_a_secret_the_cli_creates_gets_the_stacks_key_and_tags(aws):
    # Given a stack whose outputs name a KMS key and the tags its webhook secrets carry
    # When the CLI shows (so creates) a tenant's secret
    done, _ = run_cli("webhooks", "secret", "show", "--stack", "Prod", "--tenant", "tagged", **aws)
    assert done.returncode == 0, done.stderr

    # Then the secret is under that key, with those tags, as one the callbacks function had created
    client = boto3.client("secretsmanager", endpoint_url=aws["AWS_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    described = client.describe_secret(SecretId=f"{PREFIX}tagged")
    outputs = boto3.client("cloudformation", endpoint_url=aws["AWS_ENDPOINT_URL"], region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    (stack,) = outputs.describe_stacks(StackName="Prod")["Stacks"]
    key_arn = next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == wiring.OUTPUT_WEBHOOK_SECRET_KMS_KEY)
    assert described["KmsKeyId"] == key_arn
    assert {t["Key"]: t["Value"] for t in described["Tags"]} == TAGS
