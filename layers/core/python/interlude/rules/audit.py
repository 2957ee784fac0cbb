"""The tamper-evident audit log's rules (OpenWOP `openwop-audit-log-integrity`, RFC 0218), pure: no storage here.

* An entry's hash is the lowercase-hex SHA-256 of its RFC 8785 (JCS) bytes; the next entry carries it as
  `prevHash` (the first entry of each chain carries `null`).
* A checkpoint anchors the entries in `(P, atSequence]` (P: the previous checkpoint's atSequence, 0 for the
  first): their hashes are the leaves of a Merkle tree built level by level, a pair becoming the SHA-256 of the
  ASCII of `left‖right`, a trailing odd node promoted unchanged. The Ed25519 signature is over the 32 bytes the
  root's hex decodes to.
* `walk` re-walks a range of stored entries and names every anomaly in RFC 0218 §C's shapes.
* An anchor (Interlude's own, issue 26 S6) is a tenant's every chain head and last checkpoint, signed with the same
  key and published where the table's writers cannot rewrite it: a chain verified against it cannot have been cut
  short, its head rolled back or its last checkpoint removed since, unnoticed.
"""

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import rfc8785

# Entries a checkpoint anchors at most, and how long an entry waits for one at most (advertised in discovery).
CHECKPOINT_INTERVAL_ENTRIES = 1000
CHECKPOINT_INTERVAL_SECONDS = 300
# A chain keeps its pending marker this long after a checkpoint anchored every entry and its tenant's anchor holds its
# head (ADR 0122): an append meanwhile writes no marker, and the sweep takes the chain off the index only once this has
# passed with none. At a quiet tenant's pace most chains see their next entry within it.
MARKER_KEEP_SECONDS = 1800
SIGNATURE_ALGORITHM = "ed25519"
# An Ed25519 public key's DER SubjectPublicKeyInfo starts with these 12 bytes (base64 "MCowBQYDK2VwAyEA").
_ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def canonical(entry: Mapping[str, Any]) -> bytes:
    entry = dict(entry)
    if _json_is_jcs(entry):
        try:
            return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 refuses it, with its own error
    return rfc8785.dumps(entry)


# RFC 8785's bytes are the standard library's compact, key-sorted, non-ASCII-escaping JSON wherever the two
# agree: strings are escaped alike (the same seven short forms, \u00xx for the other control characters, nothing
# else), integers within JCS's range print alike, and keys sort alike when every key is ASCII (JCS sorts by UTF-16
# code units, Python by code points; they differ only past the Basic Multilingual Plane). Floats (JCS prints them as
# ECMAScript does), other integers, non-ASCII keys and any other type go to rfc8785 itself, as do subclasses.
_JCS_INT_MAX = 2**53 - 1
_JCS_SCALARS = (str, bool, type(None))


def _json_is_jcs(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is int:
            if not -_JCS_INT_MAX <= item <= _JCS_INT_MAX:
                return False
        elif kind not in _JCS_SCALARS:
            return False
    return True


def entry_hash(entry: Mapping[str, Any]) -> str:
    return hash_of(canonical(entry))


def hash_of(canonical_bytes: bytes) -> str:
    """An entry's hash from its canonical bytes (an append stores those bytes too: they are made once)."""
    return hashlib.sha256(canonical_bytes).hexdigest()


def merkle_root(leaves: list[str]) -> str:
    if not leaves:
        raise ValueError("a checkpoint anchors at least one entry")
    level = leaves
    while len(level) > 1:
        paired = [hashlib.sha256((level[i] + level[i + 1]).encode("ascii")).hexdigest() for i in range(0, len(level) - 1, 2)]
        level = paired + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def checkpoint_id(chain: int, at_sequence: int) -> str:
    return f"ckpt-{chain:03d}-{at_sequence}"


# -- Ed25519 (cryptography loads on first use: most requests sign and verify nothing) ---------------------------


def signing_key(seed: bytes) -> Any:
    """The Ed25519 private key derived from a secret's seed (any length; hashed to the 32 bytes Ed25519 takes)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"interlude-audit-checkpoint\0" + seed).digest())


def public_key_b64(private_key: Any) -> str:
    """The advertised form: base64 (padded) of the 44-byte DER SubjectPublicKeyInfo."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    der = private_key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode("ascii")


def sign_root(private_key: Any, root_hex: str) -> str:
    return base64.b64encode(private_key.sign(bytes.fromhex(root_hex))).decode("ascii")


def signature_valid(public_key: str, root_hex: str, signature: str) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        _verifier(public_key).verify(base64.b64decode(signature, validate=True), bytes.fromhex(root_hex))
    except (InvalidSignature, ValueError):
        return False
    return True


def _verifier(public_key: str) -> Any:
    """The Ed25519 public key of the advertised form; ValueError when it is not one."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    der = base64.b64decode(public_key, validate=True)
    if not der.startswith(_ED25519_SPKI_PREFIX):
        raise ValueError("not an Ed25519 public key")
    return Ed25519PublicKey.from_public_bytes(der[len(_ED25519_SPKI_PREFIX) :])


# -- when a checkpoint is due --------------------------------------------------------------------------------


class Head(NamedTuple):
    """A chain's head: the last entry's sequence and hash, the last checkpoint's atSequence, and when the oldest
    entry no checkpoint anchors yet was appended (epoch seconds; None when every entry is anchored)."""

    seq: int = 0
    hash: str | None = None
    checkpoint_seq: int = 0
    pending_since: float | None = None
    # Whether the chain's pending marker is written (the appends that find it so write none), and when a checkpoint
    # last anchored every entry (epoch seconds; None while entries wait, or for a head written before it was kept).
    marked: bool = False
    checkpointed_at: float | None = None
    # When an append last moved the head (epoch seconds, the process clock); None for a head an older release wrote.
    appended_at: float | None = None


def checkpoint_due(head: Head, now: float, early_s: float = 0) -> bool:
    """`early_s`: how much sooner than CHECKPOINT_INTERVAL_SECONDS (a periodic sweep comes this much sooner, so no
    entry waits past the interval between two of its runs)."""
    if head.seq <= head.checkpoint_seq:
        return False
    if head.seq - head.checkpoint_seq >= CHECKPOINT_INTERVAL_ENTRIES:
        return True
    return head.pending_since is not None and now - head.pending_since >= CHECKPOINT_INTERVAL_SECONDS - early_s


def settle_due(head: Head, now: float) -> bool:
    """Whether the chain may leave the pending index (once its tenant's anchor holds this head): every entry anchored,
    and none appended for MARKER_KEEP_SECONDS since."""
    if head.seq == 0 or head.seq != head.checkpoint_seq:
        return False
    return head.checkpointed_at is None or now - head.checkpointed_at >= MARKER_KEEP_SECONDS


# Where the stream's appender may leave the head behind (domain/formats.AUDIT_HEAD_LAGS_WRITTEN, docs/adr/0172): fewer
# than this many entries past it. Each decision then costs its entry's write, and one in this many the head's too
# (1.125 WRU, not 2), while a read past the head (every reader makes one) finds at most seven entries, under 4 KB:
# one read unit, as the empty read past a head that never lags.
HEAD_LAG_ENTRIES = 8


def head_may_lag(head: Head, tail: int) -> bool:
    """Whether an append whose entries reach `tail` may leave `head` where it is: the chain is on the pending index (its
    marker written) and an entry already waits for a checkpoint, which covers the entries past the head too (the
    checkpoint moves the head over them first), and fewer than HEAD_LAG_ENTRIES would lie past it. While an entry waits
    the sweep cannot take the chain off the index (settle_due; and its settle reads past the head first), so no entry
    is left past a head no sweep looks at."""
    return head.marked and head.pending_since is not None and tail - head.seq < HEAD_LAG_ENTRIES


def checkpointed(head: Head, at: int, pending_since: float | None, now: float) -> Head:
    """The head a checkpoint at `at` leaves (store/audit.py `put_checkpoint`), as far as `head`, the one it read, tells:
    an append since may have moved it on (an anchor holding this one is sound: a head is only ever at or past it)."""
    if pending_since is None:
        return head._replace(checkpoint_seq=at, pending_since=None, checkpointed_at=round(now, 3))
    return head._replace(checkpoint_seq=at, pending_since=round(pending_since, 3))


def next_checkpoint_at(head: Head) -> int:
    """The atSequence of the next checkpoint: every pending entry, at most CHECKPOINT_INTERVAL_ENTRIES of them."""
    return min(head.seq, head.checkpoint_seq + CHECKPOINT_INTERVAL_ENTRIES)


# -- anchors ---------------------------------------------------------------------------------------------------

ANCHOR_FORMAT = "interlude-audit-anchor/1"
# What an anomaly about the anchor itself names as its `checkpoint` (RFC 0218 §C: signature-invalid names one).
ANCHOR_ID = "audit-anchor"
# Signed ahead of the document's JCS bytes: no anchor signature can pass for a checkpoint's (those sign 32 bytes).
_ANCHOR_LABEL = b"interlude-audit-anchor\0"


class Anchored(NamedTuple):
    """A chain as its tenant's anchor published it: its head's sequence and hash, its last checkpoint."""

    seq: int
    hash: str | None
    checkpoint_seq: int


def anchor_document(tenant: str, heads: Mapping[int, Head], at: str) -> dict[str, Any]:
    chains = {str(chain): {"seq": h.seq, "hash": h.hash, "checkpointSeq": h.checkpoint_seq} for chain, h in heads.items()}
    return {"anchor": ANCHOR_FORMAT, "tenant": tenant, "at": at, "chains": chains}


def signed_anchor(private_key: Any, document: Mapping[str, Any]) -> bytes:
    """The published bytes: the document and its Ed25519 signature over the label and the document's JCS bytes."""
    signature = base64.b64encode(private_key.sign(_ANCHOR_LABEL + canonical(document))).decode("ascii")
    return canonical({**document, "signature": signature})


def anchored_heads(public_key: str, published: bytes, tenant: str) -> dict[int, Anchored] | None:
    """The chains a published anchor names, or None when it is not one this key signed for this tenant."""
    from cryptography.exceptions import InvalidSignature

    try:
        document = json.loads(published)
        signature = base64.b64decode(document.pop("signature"), validate=True)
        _verifier(public_key).verify(signature, _ANCHOR_LABEL + canonical(document))
        if document["anchor"] != ANCHOR_FORMAT or document["tenant"] != tenant:
            return None
        return {
            int(chain): Anchored(int(head["seq"]), head["hash"], int(head["checkpointSeq"]))
            for chain, head in document["chains"].items()
        }
    except (InvalidSignature, ValueError, TypeError, KeyError, AttributeError):
        return None


def anchor_anomalies(
    from_seq: int,
    to_seq: int,
    head: Head,
    anchored: Anchored,
    entries: Mapping[int, Mapping[str, Any]],
    checkpoints: Sequence[Mapping[str, Any]],
    chain: int,
) -> list[dict[str, Any]]:
    """What a chain's state contradicts in its published anchor, within [from_seq, to_seq]: its head behind the
    anchored one (the head rolled back or deleted), the anchored entry changed, the anchored checkpoint gone. The
    walk reaches the anchored sequence whatever the head says, so entries cut from the end are `missing-entry`."""
    found: list[dict[str, Any]] = []
    if from_seq <= anchored.seq <= to_seq:
        if head.seq < anchored.seq or head.checkpoint_seq < anchored.checkpoint_seq:
            behind = (
                f"the chain head (entry {head.seq}, checkpoint {head.checkpoint_seq}) is behind the published anchor "
                f"(entry {anchored.seq}, checkpoint {anchored.checkpoint_seq})"
            )
            found.append({"atSeq": anchored.seq, "kind": "hash-mismatch", "detail": behind})
        entry = entries.get(anchored.seq)
        # Where the head or the next entry still holds the anchored hash, the walk reports the change already.
        vouched = (head.seq, head.hash) == (anchored.seq, anchored.hash) or (
            entries.get(anchored.seq + 1, {}).get("prevHash") == anchored.hash
        )
        if entry is not None and entry_hash(entry) != anchored.hash and not vouched:
            changed = "the entry differs from the hash the published anchor holds (its successors rewritten to match)"
            found.append({"atSeq": anchored.seq, "kind": "hash-mismatch", "detail": changed})
    at = anchored.checkpoint_seq
    if at and from_seq <= at <= to_seq and all(int(c["atSequence"]) != at for c in checkpoints):
        gone = "the checkpoint the published anchor names is missing"
        found.append({"atSeq": at, "kind": "merkle-mismatch", "checkpoint": checkpoint_id(chain, at), "detail": gone})
    return found


# -- verification --------------------------------------------------------------------------------------------


def entries_walked(ends: Mapping[int, int], from_seq: int, to_seq: int) -> int:
    """How many entries a walk of [from_seq, to_seq] visits over chains ending at `ends` (chain -> last sequence):
    the range clamped to each chain's end."""
    first = max(from_seq, 1)
    return sum(max(0, min(to_seq, end) - first + 1) for end in ends.values())


def furthest_walk(ends: Mapping[int, int], from_seq: int, limit: int) -> int:
    """The largest toSeq whose walk from `from_seq` visits at most `limit` entries: where a refused range can be
    verified to, and continued from (each sequence adds at most one entry per chain, fewer than `limit`)."""
    low, high = max(from_seq, 1) - 1, max(ends.values(), default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if entries_walked(ends, from_seq, middle) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def walk(
    from_seq: int,
    to_seq: int,
    entries: Mapping[int, Mapping[str, Any]],
    checkpoints: Sequence[Mapping[str, Any]],
    head: Head,
    public_key: str | None,
    checkpoint_before: Callable[[int], int],
    chain: int | None = None,
    anchored: Anchored | None = None,
) -> dict[str, Any]:
    """The verifyAuditLog answer for `[from_seq, to_seq]`.

    `entries` holds every stored entry by sequence over the walked range and the leaves of its checkpoints (and
    the entry before `from_seq`, to check the first link); `checkpoints` those with atSequence in range, ascending;
    `checkpoint_before(at)` the atSequence of the checkpoint before the one at `at` (0 for the first); `chain`: the
    chain walked (an entry must name it); `anchored`: the chain as its tenant's anchor published it, if it did (the
    walk then reaches the anchored entry even where the head says less)."""
    anomalies: list[dict[str, Any]] = []
    last = min(to_seq, max(head.seq, anchored.seq if anchored is not None else 0))
    for seq in range(max(from_seq, 1), last + 1):
        anomalies += _entry_anomalies(seq, entries, chain)
    if from_seq <= head.seq <= to_seq and head.seq in entries and entry_hash(entries[head.seq]) != head.hash:
        # The last entry has no successor to carry its hash: the head does.
        anomalies.append({"atSeq": head.seq, "kind": "hash-mismatch", "detail": "the entry differs from the hash the chain head holds"})
    listed: list[dict[str, Any]] = []
    signatures_ok = True
    for checkpoint in checkpoints:
        at = int(checkpoint["atSequence"])
        listed.append({k: checkpoint[k] for k in ("checkpoint", "atSequence", "merkleRoot", "signature")})
        leaves = [entries.get(seq) for seq in range(checkpoint_before(at) + 1, at + 1)]
        if any(leaf is None for leaf in leaves) or merkle_root([entry_hash(leaf) for leaf in leaves if leaf is not None]) != checkpoint["merkleRoot"]:
            anomalies.append({"atSeq": at, "kind": "merkle-mismatch", "checkpoint": checkpoint["checkpoint"]})
        if public_key is None or not signature_valid(public_key, checkpoint["merkleRoot"], checkpoint["signature"]):
            signatures_ok = False
            anomalies.append({"atSeq": at, "kind": "signature-invalid", "checkpoint": checkpoint["checkpoint"]})
    if anchored is not None:
        anomalies += anchor_anomalies(from_seq, to_seq, head, anchored, entries, checkpoints, chain or 0)
    anomalies.sort(key=lambda anomaly: anomaly["atSeq"])
    answer: dict[str, Any] = {
        "fromSeq": from_seq,
        "toSeq": to_seq,
        "chainValid": not anomalies,
        "checkpoints": listed,
        "anomalies": anomalies,
    }
    if listed:
        answer["checkpointsValid"] = signatures_ok and not any(a["kind"] == "merkle-mismatch" for a in anomalies)
    return answer


def _entry_anomalies(seq: int, entries: Mapping[int, Mapping[str, Any]], chain: int | None) -> list[dict[str, Any]]:
    entry = entries.get(seq)
    if entry is None:
        return [{"atSeq": seq, "kind": "missing-entry"}]
    if entry.get("seq") != seq:
        return [{"atSeq": seq, "kind": "hash-mismatch", "detail": "the entry's seq is not its place in the log"}]
    if chain is not None and entry.get("chain") != chain:
        return [{"atSeq": seq, "kind": "hash-mismatch", "detail": "the entry names another chain than the one holding it"}]
    if seq == 1:
        expected = None
    elif seq - 1 in entries:
        expected = entry_hash(entries[seq - 1])
    else:
        return []  # the previous entry is missing (reported at its own sequence): this link cannot be checked
    actual = entry.get("prevHash")
    if actual != expected:
        return [{"atSeq": seq, "kind": "chain-break", "expectedPrevHash": expected, "actualPrevHash": actual}]
    return []
