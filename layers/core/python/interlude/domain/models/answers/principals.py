"""What the directory routes answer: a principal's entry.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from pydantic import ConfigDict, Field

from interlude.domain.models.responses import Answer, Omitted


class OutOfOfficeAnswer(Answer):
    delegate: str
    from_: str | None = Field(default=None, alias="from", exclude_if=lambda value: value is None)
    until: str = Omitted()

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class PrincipalAnswer(Answer):
    """A directory entry (issue 14) as stored, with when it was last written."""

    principalId: str
    displayName: str = Omitted()
    email: str = Omitted()
    slackUserId: str = Omitted()
    groups: list[str]
    roles: list[str]
    timeZone: str = Omitted()
    channels: list[str] = Omitted()
    outOfOffice: OutOfOfficeAnswer = Omitted()
    updatedAt: str
