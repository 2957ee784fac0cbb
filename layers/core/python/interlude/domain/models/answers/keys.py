"""What the key routes answer (GET /keys, revoking a key).

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from interlude.domain.models.responses import Answer, JsonObject, Omitted


class KeyMetadata(Answer):
    """A key as its tenant may see it: never the secret, nor the secret's hash."""

    keyId: str
    status: Literal["active", "revoked", "expired"]
    tenant: str
    subject: JsonObject
    scopes: list[str]
    groups: list[str]
    roles: list[str]
    createdAt: str
    expiresAt: str | None = Omitted()
    revokedAt: str | None = Omitted()


class KeyPage(Answer):
    keys: list[KeyMetadata]
    # Present when more keys follow: pass it as `cursor` for the next page.
    cursor: str | None = Omitted()
