"""The principal directory (issue 14 item 1): its operations, and what it adds to a decision and a gate.

* Group and role eligibility resolve through it: a resolver's groups and roles are its credential's (a key's own
  groups and roles still count for the key's subject) together with the directory entry of its subjectId, read
  at decision time and recorded on the vote as before.
* A gate's recipients (who is told it asks) are the principals its `audience` names, else those its
  `approversList`, group and role refs make eligible (openwop-notes §1.1), found through the directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.app.facts import entry_of
from interlude.app.retries import busy
from interlude.domain.clock import iso
from interlude.domain.errors import Invalid, NotFound
from interlude.domain.models import keeping_unknown
from interlude.domain.models.principals import (
    MAX_DELEGATORS_PER_DELEGATE,
    MAX_DIRECTORY_PRINCIPALS,
    PrincipalEntry,
    sendable_address,
)
from interlude.store.directory import EntryChanged, SlackUserTaken

if TYPE_CHECKING:

    from interlude.app.ports import DirectoryRecords
    from interlude.domain.clock import Clock

def answer(principal_id: str, record: dict[str, Any]) -> dict[str, Any]:
    return {"principalId": principal_id, **record["entry"], "updatedAt": record["updatedAt"]}


class Directory:
    """The tenant's principals: entries put, read and removed (quotas and delegation checked by the store's write)."""

    def __init__(self, records: DirectoryRecords, clock: Clock) -> None:
        self.records = records
        self.clock = clock

    def put_principal(self, tenant: str, principal_id: str, entry: PrincipalEntry, by: str) -> tuple[bool, dict[str, Any]]:
        """(created, the entry as stored)."""
        if entry.email is not None and sendable_address(entry.email) is None:
            # Mailed as written it would be none, or several, addresses to a mail reader, or one SES cannot send to.
            raise Invalid(
                "email must be one address, written without quotes or comments, its part before the @ in ASCII "
                "(a domain in any script is fine)",
                {"field": "email"},
            )
        if entry.outOfOffice is not None and entry.outOfOffice.delegate == principal_id:
            # As a gate's delegation (rules/interrupts/decide.py): a vote handed to its own holder decides nothing.
            raise Invalid("a principal cannot delegate to themselves", {"field": "outOfOffice.delegate"})
        stored = keeping_unknown(entry, entry_of(self.records, tenant, principal_id)).model_dump(mode="json", exclude_none=True)
        try:
            created, record = self.records.put(
                tenant, principal_id, stored, iso(self.clock()), by, MAX_DIRECTORY_PRINCIPALS, MAX_DELEGATORS_PER_DELEGATE
            )
        except EntryChanged:
            raise busy("the entry kept changing while writing it; retry") from None
        except SlackUserTaken:
            raise Invalid(
                f"another principal of this directory already has the Slack user id {entry.slackUserId}",
                {"field": "slackUserId"},
            ) from None
        return created, answer(principal_id, record)

    def get_principal(self, tenant: str, principal_id: str) -> dict[str, Any]:
        record = self.records.get(tenant, principal_id)
        if record is None:
            raise NotFound(f"no principal {principal_id!r} in this tenant's directory")
        return answer(principal_id, record)

    def delete_principal(self, tenant: str, principal_id: str) -> dict[str, Any]:
        try:
            record = self.records.delete(tenant, principal_id)
        except EntryChanged:
            raise busy("the entry kept changing while removing it; retry") from None
        if record is None:
            raise NotFound(f"no principal {principal_id!r} in this tenant's directory")
        return answer(principal_id, record)
