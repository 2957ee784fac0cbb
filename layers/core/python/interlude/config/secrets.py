"""What a secret the deployment creates for a tenant (a webhook signing secret, a subscription's, a Slack
credential) is created under and with: the construct's customer-managed key, when it has one, and its tags."""

from __future__ import annotations

from interlude import wiring
from interlude.config.reading import EnvironmentSettings, cached, json_object, setting


class CreatedSecrets(EnvironmentSettings):
    kms_key_id: str | None = setting(wiring.CREATED_SECRETS_KMS_KEY_ENV, default=None)
    tags: dict[str, str] = setting(wiring.CREATED_SECRETS_TAGS_ENV, default={}, parse=json_object)


created_secrets = cached(CreatedSecrets.from_env)
