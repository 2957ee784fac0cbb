"""What the ModuleX face reads and writes of the table beside the application services: its workflows' records, the
catalogue and versions it lists them beside, and the run listing's offset bookmarks (modulex-python pages by offset).
Protocols, as app/ports.py declares the services' own."""

from __future__ import annotations

from typing import Any, Protocol


class ModulexRecords(Protocol):
    def get_modulex_workflow(self, tenant: str, workflow_id: str) -> dict[str, Any] | None: ...

    def put_modulex_metadata(
        self, tenant: str, workflow_id: str, record: dict[str, Any], catalogue: dict[str, Any]
    ) -> bool: ...

    def delete_modulex_workflow(self, tenant: str, workflow_id: str, at: str) -> None: ...

    def latest_workflow(self, tenant: str, workflow_id: str) -> tuple[int, dict[str, Any]] | None: ...

    def latest_workflow_version(self, tenant: str, workflow_id: str) -> int | None: ...

    def catalogue_entry(self, tenant: str, workflow_id: str) -> dict[str, Any] | None: ...


class ListingBookmarks(Protocol):
    def listing_bookmark(self, tenant: str, listing: str, offset: int, now: int) -> tuple[int, str] | None: ...

    def put_listing_bookmark(self, tenant: str, listing: str, offset: int, cursor: str, expires_at: int) -> None: ...
