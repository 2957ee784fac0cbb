"""Every aggregate's store on one table, as one object: for the callers that take the whole store (the
composition's `Services`, the CLI, the local stack) until each takes the aggregates it uses.

The aggregates (one module each) share the table's name, its client and the transaction writer; combined here they
share one audit hook and one held audit head too. A function that needs less takes less: the notify worker a
RunStore, the callback worker a Table, the audit sweep a TransactionalTable.
"""

from __future__ import annotations

from interlude.store.api_keys import ApiKeyStore
from interlude.store.catalogue import CatalogueStore
from interlude.store.console_sessions import ConsoleSessionStore
from interlude.store.modulex_records import ModulexRecordStore
from interlude.store.transitions import TransitionStore
from interlude.store.workflows import WorkflowStore


class Store(TransitionStore, ApiKeyStore, ConsoleSessionStore, WorkflowStore, CatalogueStore, ModulexRecordStore):
    pass
