"""The webhook subscriptions' signing secrets in Secrets Manager (issue 14): the adapter behind app.ports'
SubscriptionSecrets, which interlude.composition makes for the webhook service and the delivery worker reads through.
The subscription items that name each secret's version in force are the store's (store.webhooks)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.config.delivery import delivery_settings
from interlude.config.secrets import created_secrets
from interlude.domain.ids import secret_name

_DESCRIPTION = "Interlude webhook subscription signing secret (current + previous through a rotation's overlap)"


def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


class SubscriptionSecrets:
    """The subscriptions' secrets in Secrets Manager, one secret each, named `{prefix}{tenant}/{opaque}` (each with
    '~' written '+', domain.ids.secret_name) and recorded on the subscription (`secretName`).

    A subscription registered before names were recorded has its secret at `{prefix}{webhookId}` with '~' written
    '_' (not injective in tenant ids, but its random opaque part made it the subscription's own): it is read there."""

    def __init__(
        self, client: Any, prefix: str, kms_key_id: str | None = None, tags: Mapping[str, str] | None = None
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.kms_key_id = kms_key_id
        self.tags = dict(tags or {})

    def name(self, webhook_id: str) -> str:
        """The name a new subscription's secret is created under."""
        return secret_name(self.prefix, *webhook_id.split("/", 1))

    def name_of(self, subscription: Mapping[str, Any]) -> str:
        """Where the secret of a stored subscription is."""
        recorded = subscription.get("secretName")
        return str(recorded) if recorded else self.prefix + str(subscription["webhookId"]).replace("~", "_")

    def create(self, name: str, value: dict[str, Any]) -> str:
        """Create a subscription's secret; returns its version."""
        version = str(uuid.uuid4())
        options: dict[str, Any] = {}
        if self.kms_key_id:
            options["KmsKeyId"] = self.kms_key_id
        if self.tags:
            options["Tags"] = [{"Key": key, "Value": tag} for key, tag in self.tags.items()]
        self.client.create_secret(
            Name=name,
            Description=_DESCRIPTION,
            SecretString=json.dumps(value, allow_nan=False),
            ClientRequestToken=version,
            **options,
        )
        return version

    def read(self, name: str, version: str | None = None) -> dict[str, Any] | None:
        """The secret's `version` (None: its current one); None when there is no such secret."""
        which = {"VersionId": version} if version else {}
        try:
            raw = self.client.get_secret_value(SecretId=name, **which)["SecretString"]
        except ClientError as exc:
            if _code(exc) in ("ResourceNotFoundException", "InvalidRequestException"):
                return None  # none, or deleted (InvalidRequestException: marked for deletion)
            raise
        value: dict[str, Any] = json.loads(raw)
        return value

    def replace(self, name: str, value: dict[str, Any]) -> str:
        """Write a new version of the secret (Secrets Manager's current one from now on); returns its version."""
        version = str(uuid.uuid4())
        self.client.put_secret_value(
            SecretId=name, SecretString=json.dumps(value, allow_nan=False), ClientRequestToken=version
        )
        return version

    def delete(self, name: str) -> None:
        try:
            self.client.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise


def subscription_secrets() -> SubscriptionSecrets:
    """The deployment's subscription secrets: its prefix, and the key and tags it creates secrets with."""
    created = created_secrets()
    return SubscriptionSecrets(
        sdk_clients.client("secretsmanager"),
        delivery_settings().subscription_secret_prefix,
        kms_key_id=created.kms_key_id,
        tags=created.tags,
    )
