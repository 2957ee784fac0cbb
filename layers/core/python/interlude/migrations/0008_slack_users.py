"""Directory entries written before a Slack click could find its principal (issue 28 item 6) name a `slackUserId`
without the item that maps that Slack user to them: each gets it, as the entry's next write would give it (claimed
only while the entry is as read and nobody holds the id; store.directory.DirectoryStore.link_slack_user). Two old
entries naming one Slack id: the first met keeps it, and the other stays unlinked until an admin changes one of them
(a write naming a taken id is refused with `field: slackUserId`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.store import attributes as a
from interlude.store.directory import ENTRY_PREFIX, DirectoryStore
from interlude.store.migrations import Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "links each directory entry's Slack user: an entry written before Slack clicks existed gets its link"
# A directory entry's partition is T#{tenant}#DIR (its memberships' partitions go on: #G#…, #R#…, #D#…); its entry a
# JSON document, which names the key only when it holds a Slack id.
SCAN = Scan(
    "begins_with(sk, :entry) AND attribute_exists(#entry) AND contains(#entry, :slack)",
    {":entry": ENTRY_PREFIX, ":slack": '"slackUserId"'},
    {"#entry": "entry"},
    "pk, sk, #entry, updatedAt",
)


def apply(store: Store, entries: list[a.Item]) -> int:
    directory = DirectoryStore(store)
    linked = 0
    for item in entries:
        partition = item["pk"]["S"]
        if not (partition.startswith("T#") and partition.endswith("#DIR")):
            continue
        slack_user_id = a.unpacked(item["entry"]).get("slackUserId")
        if not isinstance(slack_user_id, str) or not slack_user_id:
            continue
        tenant, principal_id = partition[2:].removesuffix("#DIR"), item["sk"]["S"].removeprefix(ENTRY_PREFIX)
        linked += directory.link_slack_user(tenant, principal_id, slack_user_id, item["updatedAt"]["S"])
    return linked
