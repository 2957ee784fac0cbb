"""Console sessions (issue 26, S2): one item per open session, naming the key it was opened with; deleted at sign-out,
its ttl is when it ends anyway."""

from __future__ import annotations

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import CONSOLE_SESSION_SK, console_session_pk
from interlude.store.table import Table


class ConsoleSessionStore(Table):
    def open_console_session(self, tenant: str, session_id: str, key_id: str, ends_at: int) -> None:
        item = {
            **a.key(console_session_pk(tenant, session_id), CONSOLE_SESSION_SK),
            "keyId": a.s(key_id),
            wiring.TTL_ATTRIBUTE: a.n(ends_at),
        }
        self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")

    def console_session_open(self, tenant: str, session_id: str, key_id: str) -> bool:
        # Strongly consistent: a session ended before this read is seen ended, on every instance.
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(console_session_pk(tenant, session_id), CONSOLE_SESSION_SK),
            ConsistentRead=True,
            ProjectionExpression="keyId",
        )
        return (got.get("Item") or {}).get("keyId", {}).get("S") == key_id

    def end_console_session(self, tenant: str, session_id: str) -> None:
        self.client.delete_item(TableName=self.table, Key=a.key(console_session_pk(tenant, session_id), CONSOLE_SESSION_SK))
