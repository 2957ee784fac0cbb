"""The tenant's principal directory (issue 14): who a principal is, where to reach them, what they belong to.

A principal's id is the `subjectId` its API keys carry (one namespace per tenant), so a key's subject and the
directory entry of the same id are one person: group and role eligibility resolve through the entry, and a vote
through that person's personal link and one through their key are the same principal's.
"""


from datetime import datetime
from email.errors import HeaderParseError
from email.headerregistry import Address
from typing import Annotated, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AwareDatetime, Field, StringConstraints, field_validator, model_validator

from interlude.domain.ids import SUBJECT_ID
from interlude.domain.models import Stored, new_list

# Limits of a directory (docs/limits.md): every one is checked before anything is stored.
MAX_DIRECTORY_PRINCIPALS = 10_000
MAX_GROUPS_PER_PRINCIPAL = 20
# The most directory entries whose outOfOffice names one delegate: a delegate's inbox page reads each one's
# families (docs/scale.md, "The inbox"), so this bounds what the page reads.
MAX_DELEGATORS_PER_DELEGATE = 5
MAX_ROLES_PER_PRINCIPAL = 20
MAX_DISPLAY_NAME_CHARS = 256

Channel = Literal["email", "slack"]
CHANNELS: tuple[Channel, ...] = ("email", "slack")

PrincipalId = Annotated[str, StringConstraints(pattern=SUBJECT_ID)]
# Names and addresses hold no whitespace and no control character (a NUL or an escape would reach pages and mails).
_PRINTABLE = r"[^\s\x00-\x1f\x7f-\x9f]"
_MAIL_PART = r"[^\s@\x00-\x1f\x7f-\x9f]+"
MembershipName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=f"^{_PRINTABLE}+$")]
# Deliberately plain (no DNS or deliverability check): SES refuses what it cannot send, and the outcome is logged.
Email = Annotated[str, StringConstraints(max_length=254, pattern=f"^{_MAIL_PART}@{_MAIL_PART}\\.{_MAIL_PART}$")]
SlackUserId = Annotated[str, StringConstraints(pattern=r"^[A-Z0-9]{2,32}$")]


def sendable_address(email: str) -> str | None:
    """`email` as a mail's envelope and `To` header carry it: exactly one address (RFC 5322's addr-spec, as written:
    `a,b@example.com` is two addresses to a mail reader, `a(b)@example.com` another one), its part before the @ in
    ASCII (SES sends no other) and its domain in ASCII (IDNA: `exämple.com` as `xn--exmple-cua.com`); None when it is
    not one such address."""
    try:
        parsed = Address(addr_spec=email)
    except (ValueError, IndexError, HeaderParseError):
        return None
    local, _, domain = email.rpartition("@")
    if parsed.addr_spec != email or not local.isascii():
        return None
    try:
        return f"{local}@{domain.encode('idna').decode('ascii')}"
    except UnicodeError:
        return None


class OutOfOffice(Stored):
    # The principal who acts for this one while away (issue 14 item 4 decides what a delegate may do).
    delegate: PrincipalId
    # The period, if bounded; without it the delegation holds until the entry is changed.
    start: AwareDatetime | None = Field(default=None, alias="from", exclude_if=lambda v: v is None)
    until: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)

    model_config = {**Stored.model_config, "populate_by_name": True, "serialize_by_alias": True}

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.start is not None and self.until is not None and self.until <= self.start:
            raise ValueError("outOfOffice.until must be after outOfOffice.from")
        return self

    def active(self, now: datetime) -> bool:
        return (self.start is None or self.start <= now) and (self.until is None or now < self.until)


def _unset(value: object) -> bool:
    return value is None


class PrincipalEntry(Stored):
    """`PUT /principals/{principalId}`: the whole entry (a field left out is cleared)."""

    displayName: str | None = Field(default=None, min_length=1, max_length=MAX_DISPLAY_NAME_CHARS, exclude_if=_unset)
    email: Email | None = Field(default=None, exclude_if=_unset)
    slackUserId: SlackUserId | None = Field(default=None, exclude_if=_unset)
    groups: list[MembershipName] = Field(default_factory=new_list, max_length=MAX_GROUPS_PER_PRINCIPAL)
    roles: list[MembershipName] = Field(default_factory=new_list, max_length=MAX_ROLES_PER_PRINCIPAL)
    # IANA zone: deadlines in notifications and on the approval page are shown in it (UTC when unset).
    timeZone: str | None = Field(default=None, max_length=64, exclude_if=_unset)
    # Channels the principal is told through, in this order; unset: every channel they have an address for.
    channels: list[Channel] | None = Field(default=None, max_length=len(CHANNELS), exclude_if=_unset)
    outOfOffice: OutOfOffice | None = Field(default=None, exclude_if=_unset)

    @field_validator("groups", "roles")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return sorted(set(value))

    @field_validator("channels")
    @classmethod
    def _distinct_channels(cls, value: list[Channel] | None) -> list[Channel] | None:
        return list(dict.fromkeys(value)) if value is not None else None

    @field_validator("timeZone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timeZone {value!r} is not an IANA time zone") from None
        return value

    def reachable_channels(self) -> list[Channel]:
        """The channels this principal is told through: their preference, less those without an address."""
        address = {"email": self.email, "slack": self.slackUserId}
        wanted = self.channels if self.channels is not None else list(CHANNELS)
        return [c for c in wanted if address[c]]
