"""`interlude webhooks secret show|rotate --tenant T`: a tenant's callback signing secret (Standard Webhooks).

`show` prints the current `whsec_…` secret (creating it if the tenant has none yet), for the tenant to configure
its receiver. `rotate` makes a new current secret and keeps the previous one signing for `--grace-hours`
(every delivery carries both signatures meanwhile), then prints the new secret. `--local` works on the running
local stack; otherwise the caller's AWS credentials reach the deployment's Secrets Manager, under the prefix
of `--stack`'s WebhookSecretPrefix output (or `--prefix`). A secret created here gets what the callbacks
function would give it: the stack's WebhookSecretTags and its WebhookSecretKmsKey (when it has one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from interlude import wiring
from interlude.cli.deployment import optional_stack_output, stack_output
from interlude.cli.local import add_local_args, use_local_stack

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

PREFIX_KEY = "WEBHOOK_SECRET_PREFIX"


def _client(args: argparse.Namespace) -> SecretsManagerClient:
    import boto3

    use_local_stack(args)
    return boto3.client("secretsmanager")


def _print(tenant: str, name: str, value: dict, now: float) -> int:
    previous = [
        {"until": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p["until"]))}
        for p in value.get("previous", [])
        if p["until"] > now
    ]
    print(json.dumps({"tenant": tenant, "secretName": name, "secret": value["current"], "previous": previous}))
    return 0


def _prefix(args: argparse.Namespace) -> str:
    """--prefix, else the deployment's own (--stack), else the local stack's."""
    prefix = args.prefix or stack_output(args, wiring.OUTPUT_WEBHOOK_SECRET_PREFIX)
    if prefix:
        return prefix
    if args.local:
        return wiring.SECRET_PREFIXES[PREFIX_KEY]
    sys.exit("interlude: name the deployment with --stack (or the secrets' prefix with --prefix, or --local)")


def _creation(args: argparse.Namespace) -> tuple[str | None, dict[str, str]]:
    """(KMS key, tags) a secret created for the deployment --stack names gets; (None, {}) without one."""
    tags = optional_stack_output(args, wiring.OUTPUT_WEBHOOK_SECRET_TAGS)
    return optional_stack_output(args, wiring.OUTPUT_WEBHOOK_SECRET_KMS_KEY), json.loads(tags or "{}")


def _show(args: argparse.Namespace) -> int:
    from interlude.adapters.delivery.signing import ensure_secret, secret_name

    name = secret_name(_prefix(args), args.tenant)
    kms_key_id, tags = _creation(args)
    return _print(args.tenant, name, ensure_secret(_client(args), name, kms_key_id, tags), time.time())


def _rotate(args: argparse.Namespace) -> int:
    from interlude.adapters.delivery.signing import rotate_secret, secret_name

    name = secret_name(_prefix(args), args.tenant)
    now = time.time()
    kms_key_id, tags = _creation(args)
    rotated = rotate_secret(_client(args), name, args.grace_hours * 3600, now, kms_key_id, tags)
    return _print(args.tenant, name, rotated, now)


def add_commands(sub: argparse._SubParsersAction) -> None:
    webhooks = sub.add_parser("webhooks", help="callback delivery").add_subparsers(
        dest="webhooks_command", required=True
    )
    secret = webhooks.add_parser("secret", help="a tenant's signing secret").add_subparsers(
        dest="secret_command", required=True
    )
    for name, func, text in (
        ("show", _show, "print the tenant's current signing secret (created if missing)"),
        ("rotate", _rotate, "new secret; the previous one keeps signing for the grace period"),
    ):
        cmd = secret.add_parser(name, help=text)
        cmd.add_argument("--tenant", required=True)
        cmd.add_argument("--prefix", help="secret name prefix (default: --stack's WebhookSecretPrefix output)")
        add_local_args(cmd)
        if name == "rotate":
            cmd.add_argument("--grace-hours", type=float, default=24.0, help="how long the old secret keeps signing")
        cmd.set_defaults(func=func)
