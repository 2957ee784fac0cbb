"""Gates whose interrupt item is in format 3 (domain/formats.GATE_STATUS_ON_HEAD), written by the store's own path:
the format a new gate's item is written in set to 3, as the release that writes it sets it (docs/adr/0126)."""

from __future__ import annotations

import pytest

from interlude.domain import formats


@pytest.fixture
def gates_written_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "INTERRUPT_ITEM_WRITTEN", formats.GATE_STATUS_ON_HEAD)
