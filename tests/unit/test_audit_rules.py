"""The audit log's construction as RFC 0218 pins it: entry hashes over RFC 8785 bytes, the Merkle root built level
by level with an odd node promoted, the Ed25519 signature over the root's 32 bytes, the advertised key's form."""

from __future__ import annotations

import base64
import hashlib
import json
import re

from interlude import wiring
from interlude.domain.audit import AuditDraft
from interlude.rules import audit as rules


def h(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def test_an_entry_is_hashed_over_its_canonical_bytes_whatever_the_key_order_or_number_form() -> None:
    entry = {"seq": 2, "prevHash": None, "details": {"b": 1.0, "a": "é"}, "at": "2026-12-01T00:00:00Z"}
    assert rules.canonical(entry) == '{"at":"2026-12-01T00:00:00Z","details":{"a":"é","b":1},"prevHash":null,"seq":2}'.encode()
    assert rules.entry_hash(entry) == hashlib.sha256(rules.canonical(entry)).hexdigest()
    assert rules.entry_hash(dict(reversed(list(entry.items())))) == rules.entry_hash(entry)


def test_the_merkle_root_promotes_an_odd_node_unchanged_as_the_worked_example() -> None:
    # A checkpoint at 12 after one at 7: leaves l8..l12; level 1 is H(l8‖l9), H(l10‖l11), l12.
    leaves = [h(f"l{n}") for n in range(8, 13)]
    level1 = [h(leaves[0] + leaves[1]), h(leaves[2] + leaves[3]), leaves[4]]
    assert rules.merkle_root(leaves) == h(h(level1[0] + level1[1]) + level1[2])
    assert rules.merkle_root(leaves[:1]) == leaves[0]


def test_a_checkpoint_signature_is_over_the_roots_raw_bytes_and_the_public_key_is_der_spki() -> None:
    key = rules.signing_key(b"seed")
    public = rules.public_key_b64(key)
    assert re.fullmatch(r"MCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=", public)
    root = rules.merkle_root([h("a"), h("b")])
    signature = rules.sign_root(key, root)
    key.public_key().verify(base64.b64decode(signature), bytes.fromhex(root))  # not over the hex text
    assert rules.signature_valid(public, root, signature)
    assert not rules.signature_valid(public, h("other"), signature)
    assert not rules.signature_valid(rules.public_key_b64(rules.signing_key(b"another seed")), root, signature)
    assert not rules.signature_valid(public, root, "not base64!")


def test_a_checkpoint_is_due_after_the_interval_in_entries_or_in_time() -> None:
    assert not rules.checkpoint_due(rules.Head(), now=10**9)
    assert rules.checkpoint_due(rules.Head(seq=1000, checkpoint_seq=0, pending_since=100.0), now=101.0)
    assert not rules.checkpoint_due(rules.Head(seq=999, checkpoint_seq=0, pending_since=100.0), now=101.0)
    assert rules.checkpoint_due(rules.Head(seq=1, pending_since=100.0), now=100.0 + rules.CHECKPOINT_INTERVAL_SECONDS)
    assert rules.next_checkpoint_at(rules.Head(seq=2500, checkpoint_seq=1000)) == 2000


def test_a_checkpoint_leaves_the_head_it_read_anchored_up_to_it_waiting_from_the_entry_after_or_not_at_all() -> None:
    read = rules.Head(seq=1500, hash="h", checkpoint_seq=0, pending_since=10.0, marked=True, appended_at=20.0)
    # Entries left beyond it (a checkpoint anchors at most CHECKPOINT_INTERVAL_ENTRIES): they wait from the next one's time.
    assert rules.checkpointed(read, 1000, 15.0004, 30.0) == read._replace(checkpoint_seq=1000, pending_since=15.0)
    # Every entry anchored: none waits, and when that happened is kept (the marker's keep counts from it).
    assert rules.checkpointed(read, 1500, None, 30.0004) == read._replace(checkpoint_seq=1500, pending_since=None, checkpointed_at=30.0)


def test_the_walk_names_each_anomaly_in_rfc_0218_shapes() -> None:
    drafts = [AuditDraft("t", "key.created", {"subjectId": "a"}, {"keyId": str(n)}, "2026-12-01T00:00:00Z") for n in range(4)]
    entries: dict[int, dict] = {}
    previous = None
    for seq, draft in enumerate(drafts, start=1):
        entries[seq] = draft.entry(seq, previous, 5)
        previous = rules.entry_hash(entries[seq])
    head = rules.Head(seq=4, hash=previous)
    walk = rules.walk(1, 4, entries, [], head, None, lambda at: 0)
    assert walk == {"fromSeq": 1, "toSeq": 4, "chainValid": True, "checkpoints": [], "anomalies": []}

    tampered = {**entries, 2: {**entries[2], "target": {"keyId": "x"}}}
    assert rules.walk(1, 4, tampered, [], head, None, lambda at: 0)["anomalies"] == [
        {"atSeq": 3, "kind": "chain-break", "expectedPrevHash": rules.entry_hash(tampered[2]), "actualPrevHash": entries[3]["prevHash"]}
    ]
    renumbered = {**entries, 2: {**entries[2], "seq": 7}}
    assert rules.walk(2, 2, renumbered, [], head, None, lambda at: 0)["anomalies"][0]["kind"] == "hash-mismatch"
    assert rules.walk(1, 4, {k: v for k, v in entries.items() if k != 3}, [], head, None, lambda at: 0)["anomalies"] == [
        {"atSeq": 3, "kind": "missing-entry"}
    ]
    # Each entry names its chain (inside what is hashed): walked as another chain's, it does not belong.
    assert rules.walk(1, 4, entries, [], head, None, lambda at: 0, chain=5)["chainValid"] is True
    assert [a["atSeq"] for a in rules.walk(1, 4, entries, [], head, None, lambda at: 0, chain=6)["anomalies"]] == [1, 2, 3, 4]


def test_the_canonical_bytes_are_rfc8785s_for_every_shape_including_those_it_refuses() -> None:
    # canonical() takes the standard library's JSON where it prints what RFC 8785 prints (ASCII keys, integers in
    # JCS's range, no floats) and rfc8785 elsewhere: both paths, and the refusals, must equal rfc8785's own.
    import random

    import pytest
    import rfc8785

    rnd = random.Random(13)
    chars = ["a", "Z", "0", "é", "€", "\u2028", "\x7f", "\x00", "\x1f", '"', "\\", "\n", "\t", "\b", "\f", "\r",
             "\ud800", "\U0001f600", "\uffff", "\ue000"]
    numbers = [0, -1, 12345, 2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 10**30, True, False]
    floats = [1.0, 0.5, 1e21, 1e-7, -0.0, 3.14, 1e300, float("nan"), float("inf")]

    def text() -> str:
        return "".join(rnd.choice(chars) for _ in range(rnd.randint(0, 5)))

    def value(depth: int) -> object:
        pick = rnd.randint(0, 9 if depth < 3 else 4)
        if pick in (0, 1):
            return text()
        if pick == 2:
            return rnd.choice(numbers)
        if pick == 3:
            return rnd.choice([None, *floats]) if rnd.random() < 0.3 else None
        if pick == 4:
            return rnd.choice(["seq", "prevHash", "at", "x"])
        if pick in (5, 6, 7):
            return {text() if rnd.random() < 0.3 else rnd.choice(["a", "b", "B", "_"]): value(depth + 1) for _ in range(rnd.randint(0, 4))}
        return (list if pick == 8 else tuple)(value(depth + 1) for _ in range(rnd.randint(0, 3)))

    def outcome(make: object, entry: dict[str, object]) -> object:
        try:
            return make(entry)  # type: ignore[operator]
        except Exception as error:  # noqa: BLE001 - the refusal's class is compared
            return type(error)

    fast = 0
    for _ in range(3000):
        entry = {text() if rnd.random() < 0.2 else rnd.choice(["seq", "at", "details"]): value(0) for _ in range(rnd.randint(0, 5))}
        assert outcome(rules.canonical, entry) == outcome(rfc8785.dumps, entry), entry
        fast += rules._json_is_jcs(entry)
    assert 300 < fast < 2700  # both paths were taken
    with pytest.raises(rfc8785.CanonicalizationError):
        rules.canonical({"lone": "\ud800"})


def test_a_walk_counts_the_range_clamped_to_each_chains_end_and_names_how_far_a_bounded_one_reaches() -> None:
    ends = {0: 10, 3: 2, 7: 0}
    # fromSeq=0 is walked from 1; a toSeq past every end walks each chain to its end, whatever its width.
    assert rules.entries_walked(ends, 0, 1_000_000) == 12
    assert rules.entries_walked(ends, 2, 5) == 4 + 1
    assert rules.entries_walked(ends, 11, 10**12) == 0
    # The furthest toSeq a walk of at most `limit` entries reaches: verified there, the next walk starts after it.
    assert rules.furthest_walk(ends, 0, 12) == 10
    assert rules.furthest_walk(ends, 0, 5) == 3  # seq 1..2 in two chains (4), then seq 3 in one
    assert rules.entries_walked(ends, 0, 3) <= 5 < rules.entries_walked(ends, 0, 4)
    assert rules.furthest_walk(ends, 4, 3) == 6


def test_an_anchor_reads_back_only_as_signed_by_this_key_for_this_tenant() -> None:
    key = rules.signing_key(b"anchor test seed")
    public = rules.public_key_b64(key)
    heads = {0: rules.Head(3, "a" * 64, 2), 7: rules.Head(1, "b" * 64, 0)}
    published = rules.signed_anchor(key, rules.anchor_document("acme", heads, "2026-12-05T00:00:00Z"))
    assert rules.anchored_heads(public, published, "acme") == {0: rules.Anchored(3, "a" * 64, 2), 7: rules.Anchored(1, "b" * 64, 0)}
    assert rules.anchored_heads(public, published, "other") is None
    assert rules.anchored_heads(rules.public_key_b64(rules.signing_key(b"another seed")), published, "acme") is None
    tampered = published.replace(b'"seq":3', b'"seq":2')
    assert rules.anchored_heads(public, tampered, "acme") is None
    for garbage in (b"", b"[]", b'{"signature": 1}', b"\xff"):
        assert rules.anchored_heads(public, garbage, "acme") is None
    # The signature is over a label and the document: it is no checkpoint signature over any root.
    signature = json.loads(published)["signature"]
    root = hashlib.sha256(rules.canonical(rules.anchor_document("acme", heads, "2026-12-05T00:00:00Z"))).hexdigest()
    assert not rules.signature_valid(public, root, signature)


def chained(count: int, chain: int = 0) -> dict[int, dict]:
    entries: dict[int, dict] = {}
    previous = None
    for seq in range(1, count + 1):
        entries[seq] = AuditDraft("acme", "key.created", {"subjectId": "a"}, {"keyId": f"k{seq}"}, "2026-12-05T00:00:00Z").entry(seq, previous, chain)
        previous = rules.entry_hash(entries[seq])
    return entries


def test_an_anchored_entry_changed_is_reported_once_and_a_rechained_tail_against_the_anchor() -> None:
    entries = chained(4)
    head = rules.Head(4, rules.entry_hash(entries[4]), 0)
    anchored = rules.Anchored(3, rules.entry_hash(entries[3]), 0)

    def anomalies(stored: dict[int, dict], at_head: rules.Head) -> list[tuple[int, str]]:
        answer = rules.walk(0, 10, stored, [], at_head, None, lambda at: 0, 0, anchored)
        return [(a["atSeq"], a.get("kind", "chain-break")) for a in answer["anomalies"]]

    assert anomalies(entries, head) == []
    # Entry 3 altered: its successor's prevHash already says so; the anchor adds nothing.
    altered = {**entries, 3: {**entries[3], "details": {"x": 1}}}
    assert anomalies(altered, head) == [(4, "chain-break")]
    # Entry 3 altered and entry 4 and the head rewritten to match: only the anchor still knows.
    rechained = {**altered, 4: {**entries[4], "prevHash": rules.entry_hash(altered[3])}}
    rehead = rules.Head(4, rules.entry_hash(rechained[4]), 0)
    assert anomalies(rechained, rehead) == [(3, "hash-mismatch")]


def test_a_head_may_lag_only_while_marked_with_an_entry_waiting_and_fewer_than_head_lag_entries_past_it() -> None:
    waiting = rules.Head(4, "h", 2, 100.0, True)
    assert rules.head_may_lag(waiting, 5)
    assert rules.head_may_lag(waiting, 4 + rules.HEAD_LAG_ENTRIES - 1)
    assert not rules.head_may_lag(waiting, 4 + rules.HEAD_LAG_ENTRIES)
    assert not rules.head_may_lag(waiting._replace(marked=False), 5)  # its marker is written with the head's move
    assert not rules.head_may_lag(waiting._replace(pending_since=None), 5)  # the sweep may settle it: see below


def test_an_append_reads_the_head_and_puts_its_entries_well_within_the_quiet_a_settle_waits_for() -> None:
    # settle (store/audit.py) takes a chain off the pending index once its checkpoint is MARKER_KEEP_SECONDS old, after
    # one read past the head: an append that read the head before that checkpoint (and may lag) has put its entries by
    # then, within one invocation of the function that appends (docs/adr/0172).
    assert wiring.function("dispatch").timeout_s < rules.MARKER_KEEP_SECONDS
