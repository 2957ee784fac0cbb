"""What the token surfaces answer when a token is minted.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from interlude.domain.models.responses import Answer, JsonObject


class MintedToken(Answer):
    interruptId: str
    token: str
    expiresAt: str
    intent: Literal["resolve", "inspect"]
    payload: JsonObject
    # The token surface's address for this token (GET: the payload or the approval page; POST: resolve).
    url: str


class MintedLink(Answer):
    """A link that decides as one directory principal (issue 28 item 5)."""

    interruptId: str
    principal: str
    expiresAt: str
    url: str
