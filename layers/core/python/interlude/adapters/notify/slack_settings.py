"""The tenant's Slack credential (issue 14): an incoming-webhook URL or a bot token, kept in Secrets Manager under
`{SLACK_SECRET_PREFIX}{tenant}` (a `~` in the tenant id written `+`). Written here, read by the notify worker (to post
and update messages) and by the api function (a bot token opens the decision modal: views.open); no answer ever
carries it. And its Slack app's signing secret (issue 28 item 6), a secret of its own under
`{SLACK_SIGNING_SECRET_PREFIX}{tenant}`: the api function reads it to verify clicks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.config.notify import notify_settings
from interlude.config.secrets import created_secrets
from interlude.domain.ids import secret_name

_DESCRIPTION = "Interlude: a tenant's Slack incoming-webhook URL or bot token (issue 14)"
_SIGNING_DESCRIPTION = "Interlude: a tenant's Slack app signing secret, which verifies its clicks (issue 28)"


def slack_secret_name(tenant: str, prefix: str | None = None) -> str:
    return secret_name(prefix or notify_settings().slack_secret_prefix, tenant)


def slack_signing_secret_name(tenant: str, prefix: str | None = None) -> str:
    return secret_name(prefix or notify_settings().slack_signing_secret_prefix, tenant)


def store_slack(tenant: str, value: Mapping[str, Any], client: Any = None) -> None:
    """Create or replace the tenant's Slack secret (with the deployment's key and tags when it sets them)."""
    _store(slack_secret_name(tenant), value, _DESCRIPTION, client)


def store_signing_secret(tenant: str, signing_secret: str, client: Any = None) -> None:
    _store(slack_signing_secret_name(tenant), {"signingSecret": signing_secret}, _SIGNING_DESCRIPTION, client)


def _store(name: str, value: Mapping[str, Any], description: str, client: Any = None) -> None:
    client = client or sdk_clients.client("secretsmanager")
    text = json.dumps(dict(value), separators=(",", ":"), allow_nan=False)
    try:
        client.put_secret_value(SecretId=name, SecretString=text)
        return
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
    options: dict[str, Any] = {}
    created = created_secrets()
    if created.kms_key_id:
        options["KmsKeyId"] = created.kms_key_id
    if created.tags:
        options["Tags"] = [{"Key": k, "Value": v} for k, v in created.tags.items()]
    try:
        client.create_secret(Name=name, Description=description, SecretString=text, **options)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceExistsException":
            raise
        client.put_secret_value(SecretId=name, SecretString=text)
