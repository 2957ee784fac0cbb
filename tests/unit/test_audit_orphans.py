"""Which entries past a chain's head an append adopts (docs/adr/0135): the run that chains from the head, each at the
next sequence, in this chain, its prevHash the hash of the one before; everything after the first that does not is
stale (written over by the append that takes its place), never adopted."""

from __future__ import annotations

from typing import Any

from interlude.domain.audit import AuditDraft
from interlude.rules import audit as rules
from interlude.rules.audit import Head
from interlude.store import audit as items

CHAIN = 3


def entry_item(seq: int, prev: str | None, chain: int = CHAIN, source: str | None = None) -> dict[str, Any]:
    draft = AuditDraft("t", "interrupt.decided", {"subjectId": "s"}, {"runId": f"run-{seq}"}, "2026-12-06T07:00:00Z", {})
    item: dict[str, Any] = {
        "pk": {"S": items.log_pk("t", chain)},
        "sk": {"S": items.entry_sk(seq)},
        "entry": {"S": rules.canonical(draft.entry(seq, prev, chain)).decode()},
    }
    if source is not None:
        item["source"] = {"S": source}
    return item


def hash_of(item: dict[str, Any]) -> str:
    return rules.hash_of(item["entry"]["S"].encode())


def test_the_run_that_chains_from_the_head_is_adopted_with_the_sources_it_names() -> None:
    first = entry_item(5, "h4", source="a")
    second = entry_item(6, hash_of(first), source="b")

    found = items.orphans_of(Head(4, "h4"), CHAIN, [first, second])

    assert (found.seq, found.hash) == (6, hash_of(second))
    assert found.sources == {"a", "b"}
    assert found.stale == {}
    assert found.adopts(Head(4, "h4"))


def test_a_first_entry_of_a_chain_chains_from_no_hash() -> None:
    first = entry_item(1, None)
    found = items.orphans_of(Head(), CHAIN, [first])
    assert (found.seq, found.hash) == (1, hash_of(first))


def test_nothing_past_the_head_adopts_nothing() -> None:
    found = items.orphans_of(Head(4, "h4"), CHAIN, [])
    assert (found.seq, found.hash, found.stale) == (4, "h4", {})
    assert not found.adopts(Head(4, "h4"))


def test_an_entry_that_does_not_chain_and_all_after_it_are_stale() -> None:
    first = entry_item(5, "h4")
    forged = entry_item(6, "not the hash of 5")
    after = entry_item(7, hash_of(forged), source="c")

    found = items.orphans_of(Head(4, "h4"), CHAIN, [first, forged, after])

    assert found.seq == 5
    assert set(found.stale) == {6, 7}
    assert found.sources == frozenset()


def test_an_entry_of_another_chain_a_wrong_sequence_or_a_gap_is_never_adopted() -> None:
    head = Head(4, "h4")
    assert items.orphans_of(head, CHAIN, [entry_item(5, "h4", chain=CHAIN + 1)]).stale.keys() == {5}
    assert items.orphans_of(head, CHAIN, [entry_item(6, "h4")]).stale.keys() == {6}
    misnumbered = entry_item(5, "h4")
    misnumbered["sk"] = {"S": items.entry_sk(6)}
    assert not items.orphans_of(head, CHAIN, [misnumbered]).adopts(head)
