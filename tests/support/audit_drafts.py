"""Transitions written as format 5's writer writes them (docs/adr/0128): the audit entry's draft on the event batch,
chained by the appender on the stream, not in the transition's own transaction. The release that first reads format 5
still appends in the transaction; its tests write what the next release will leave behind with this."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from interlude.store import transitions


@contextmanager
def drafts_on_event_batches() -> Iterator[None]:
    before = transitions.AUDIT_DRAFTS_ON_BATCH
    transitions.AUDIT_DRAFTS_ON_BATCH = True
    try:
        yield
    finally:
        transitions.AUDIT_DRAFTS_ON_BATCH = before
