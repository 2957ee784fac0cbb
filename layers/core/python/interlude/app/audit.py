"""The tenant audit log: appending (one function, `append`, or a draft handed to a store write so the action and
its entry are one transaction), signed checkpoints, verification and listing. README "Audit"; the rules of the
chain are rules/audit.py, its items store/audit.py.

How other operations record what they did: app/audit_entries.py drafts the entry.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from interlude import wiring
from interlude.app.caught import caught
from interlude.domain import clock
from interlude.domain.clock import instant
from interlude.domain.errors import Invalid, NotFound, Unavailable
from interlude.rules import audit as rules
from interlude.store.audit import CLOCK_SLACK_S, Listed, chain_of, decode_before, encode_before

if TYPE_CHECKING:
    from collections.abc import Callable

    # Annotations only: the timeouts function's checkpoint sweep loads this module and needs no run model.
    from interlude.app.ports import Anchors, AnchorsSource, AuditChains, Concurrently, SigningKeySource, Transactions
    from interlude.domain.audit import AuditDraft

logger = logging.getLogger(__name__)

# The most entries one GET /audit/verify walks over the tenant's chains ([fromSeq, toSeq] clamped to each chain's
# end), counted from the heads before any entry is read; besides those, each chain's first checkpoint in range
# re-reads its leaves before fromSeq (fewer than CHECKPOINT_INTERVAL_ENTRIES). A longer walk is refused, naming the
# toSeq it may reach (README, "Audit").
MAX_VERIFY_ENTRIES = 10_000
DEFAULT_PAGE = 50
MAX_PAGE = 200
# The fewest entries a page first reads of a chain: seven of ≈ 520 B fill the 4 KB an eventually consistent read unit
# (half an RRU) bills a Query for however few it holds (`chain_page`, docs/adr/0173).
CHAIN_PAGE_MIN = 7

# -- appending and checkpoints -----------------------------------------------------------------------------------


class AuditTrail:
    """The tenant audit log's own operations: appends, signed checkpoints and anchors, verification, listing."""

    def __init__(
        self,
        chains: AuditChains,
        writes: Transactions,
        signing_key: SigningKeySource | None = None,
        anchors: AnchorsSource | None = None,
        concurrently: Concurrently[int, Listed] | None = None,
    ) -> None:
        self.chains = chains
        self.writes = writes
        self._signing_key = signing_key
        self._anchors = anchors
        # Runs a listing's reads of several chains side by side (the composition's threads); else one after another.
        self._concurrently = concurrently

    def signing_key(self) -> Any:
        if self._signing_key is None:
            return None
        try:
            return self._signing_key()
        except Exception:  # noqa: BLE001 - a missing key stops checkpoints, never the action being audited
            caught(logger, "audit-key-read", "the audit checkpoint key could not be read")
            return None

    def public_key(self) -> str | None:
        key = self.signing_key()
        return rules.public_key_b64(key) if key is not None else None

    def anchors(self) -> Anchors | None:
        return self._anchors() if self._anchors is not None else None

    def append(self, entry: AuditDraft) -> None:
        """Append an entry on its own (for an action that writes nothing else, e.g. a token mint)."""
        self.writes.transact([], entry)

    def append_drafts(self, drafts: list[tuple[str, str, AuditDraft]]) -> dict[str, BaseException]:
        """The appender on the stream (docs/adr/0128): chain the drafts a batch's event batches carry ((record id,
        source, draft), in the batch's order), each chain's as plain conditional writes (its entries, then its head:
        docs/adr/0135), a draft already appended by an earlier delivery skipped. Answers the records whose chain's
        append failed (they go again, and to the dead-letter queue after the queue's receives, as dispatch's records
        do)."""
        by_chain: dict[tuple[str, int], list[tuple[str, str, AuditDraft]]] = {}
        for record_id, source, draft in drafts:
            by_chain.setdefault((draft.tenant, chain_of(draft)), []).append((record_id, source, draft))
        failed: dict[str, BaseException] = {}
        for (tenant, chain), placed in by_chain.items():
            try:
                written = self.chains.append_drafts(tenant, chain, [(d, source) for _, source, d in placed], time.time())
            except Exception as exc:  # noqa: BLE001 - this chain's records go again; the other chains' stand
                failed.update(dict.fromkeys((record_id for record_id, _, _ in placed), exc))
                continue
            if written is not None:
                self.checkpoint_if_due(tenant, chain, written)
        return failed

    def checkpoint_if_due(self, tenant: str, chain: int, head: rules.Head) -> None:
        """Checkpoint right after an append that makes one due (the periodic sweep catches the quiet chains): the
        store's `after_audit`, which the composition sets."""
        if not rules.checkpoint_due(head, time.time()):
            return
        try:
            self.checkpoint(tenant, chain)
        except Exception:  # noqa: BLE001 - the action is committed; the sweep retries the checkpoint
            caught(logger, "audit-checkpoint", "audit checkpoint of tenant %s chain %s failed", tenant, chain)

    def checkpoint(self, tenant: str, chain: int, attempts: int = 5) -> dict[str, Any] | None:
        """Sign a checkpoint over the chain's entries no checkpoint anchors yet (at most CHECKPOINT_INTERVAL_ENTRIES);
        None when there are none, or no signing key."""
        done = self.checkpoint_made(tenant, chain, attempts)
        return done[0] if done is not None else None

    def checkpoint_made(self, tenant: str, chain: int, attempts: int = 5) -> tuple[dict[str, Any], rules.Head] | None:
        """The checkpoint made, and the head it left as far as the head read tells (rules.checkpointed)."""
        key = self.signing_key()
        if key is None:
            return None
        log = self.chains
        for _ in range(attempts):
            # The head moved over the entries past it first (docs/adr/0172): the checkpoint covers them, and stays at
            # or under the head, as the sweep, its settle and the anchor (and 0.7.0's readers) take it.
            head = log.caught_up(tenant, chain, log.head(tenant, chain))
            if head is None:
                continue
            if head.seq <= head.checkpoint_seq:
                return None
            at = rules.next_checkpoint_at(head)
            stored = dict(log.entries(tenant, chain, head.checkpoint_seq + 1, at + 1))
            leaves = [rules.entry_hash(stored[seq]) for seq in range(head.checkpoint_seq + 1, at + 1) if seq in stored]
            root = rules.merkle_root(leaves)
            made = {
                "checkpoint": rules.checkpoint_id(chain, at),
                "atSequence": at,
                "merkleRoot": root,
                "signature": rules.sign_root(key, root),
                "at": _iso_now(),
            }
            following = stored.get(at + 1)
            pending_since = instant(following["at"]).timestamp() if following is not None and at < head.seq else None
            if at < head.seq and pending_since is None:
                pending_since = time.time()
            now = time.time()
            if log.put_checkpoint(tenant, chain, head, made, pending_since, now):
                return made, rules.checkpointed(head, at, pending_since, now)
        return None

    def checkpoint_pending(self, early_s: float = 0) -> int:
        """The periodic sweep (wiring.AUDIT_CHECKPOINT_SWEEP, every `early_s`): checkpoint every chain whose oldest
        unanchored entry would pass the interval before the next sweep, publish the anchor of each tenant whose anchor
        does not hold all its pending chains' heads yet, and take off the index the chains anchored and quiet for
        MARKER_KEEP_SECONDS. Returns how many checkpoints it made."""
        made = 0
        pending: dict[str, list[int]] = {}
        for tenant, chain in list(self.chains.pending_chains()):
            pending.setdefault(tenant, []).append(chain)
        for tenant, chains in pending.items():
            try:
                made += self._sweep(tenant, chains, early_s)
            except Exception:  # noqa: BLE001 - the next sweep tries again; the chains stay pending until then
                caught(logger, "audit-anchor", "audit sweep of tenant %s failed", tenant)
        return made

    def _sweep(self, tenant: str, chains: list[int], early_s: float) -> int:
        # The pending chains' heads (every chain's when they are most of them: the anchor needs all), read once for the
        # due checks and the anchor, eventually consistent (half the units of the read a quiet tenant's sweep makes each
        # minute, 128 heads); a chain checkpointed here takes the head its checkpoint left. An anchor holding a head a
        # little older than the table's is sound (a verification reads the anchor first and expects the heads at or past
        # it; a head only moves forward); a checkpoint reads its chain's head strongly, and a settle is conditional on
        # the head it was given, so neither acts on a stale one.
        whole = 2 * len(chains) >= wiring.AUDIT_CHAINS
        heads = self.chains.heads(tenant, None if whole else chains, consistent=False)
        made = 0
        for chain in chains:
            head = heads.get(chain)
            if head is None or not rules.checkpoint_due(head, time.time(), early_s):
                continue
            try:
                done = self.checkpoint_made(tenant, chain)
                if done is not None:
                    made += 1
                    heads[chain] = done[1]
            except Exception:  # noqa: BLE001 - one chain's failure must not stop the others' checkpoints
                caught(logger, "audit-checkpoint", "audit checkpoint of tenant %s chain %s failed", tenant, chain)
        # A chain kept on the index after it was anchored changes nothing: while every pending chain's head is the
        # one the published anchor holds (one GET), the anchor stands and is not published again.
        waiting = made > 0 or any(head.seq != head.checkpoint_seq for c, head in heads.items() if c in chains)
        if waiting or not self._anchor_holds(tenant, {c: heads[c] for c in chains if c in heads}):
            self.publish_anchor(tenant, chains, heads if whole else None, consistent=False)
        else:
            self._settle(tenant, chains, heads)
        return made

    def _anchor_holds(self, tenant: str, heads: dict[int, rules.Head]) -> bool:
        key, published = self.public_key(), self.anchors()
        if key is None or published is None:
            return True  # nothing to publish: the chains settle as they are
        raw = published.read(tenant)
        anchored = rules.anchored_heads(key, raw, tenant) if raw is not None else None
        if anchored is None:
            return False
        return all(anchored.get(c) == (h.seq, h.hash, h.checkpoint_seq) for c, h in heads.items())

    def publish_anchor(
        self, tenant: str, pending: list[int], heads: dict[int, rules.Head] | None = None, consistent: bool = True
    ) -> None:
        """Publish the tenant's anchor (every chain's head and last checkpoint, signed; `heads`: every chain's as just
        read, else read here, `consistent` or not), then take off the pending index each of the `pending` chains
        anchored and quiet for MARKER_KEEP_SECONDS: the anchor now holds that head (issue 26 S6)."""
        heads = self.chains.heads(tenant, consistent=consistent) if heads is None else heads
        key, published = self.signing_key(), self.anchors()
        if key is not None and published is not None:
            published.publish(tenant, rules.signed_anchor(key, rules.anchor_document(tenant, heads, _iso_now())))
        self._settle(tenant, pending, heads)

    def _settle(self, tenant: str, chains: list[int], heads: dict[int, rules.Head]) -> None:
        now = time.time()
        for chain in chains:
            head = heads.get(chain)
            if head is not None and rules.settle_due(head, now):
                self.chains.settle(tenant, chain, head)

    def verify(self, tenant: str, from_seq: int, to_seq: int, chain: int | None = None) -> dict[str, Any]:
        """verifyAuditLog: re-walk [from_seq, to_seq] of each of the tenant's chains (or of `chain` alone), every
        anomaly named (its `detail` names the chain)."""
        if from_seq < 0 or to_seq < from_seq:
            raise Invalid("fromSeq and toSeq must be integers with 0 <= fromSeq <= toSeq", {"field": "toSeq"})
        key = self.public_key()
        if key is None:
            # Discovery advertises auditLogIntegrity only with the key (api/runs.py): an unadvertised family's route 404s.
            raise NotFound("this host does not advertise auditLogIntegrity: its checkpoint key cannot be read")
        # The anchor before the heads: a head read after it is at or past what it published, unless rolled back.
        anchored, anomalies = self._published(tenant, key, from_seq)
        log = self.chains
        # Each chain to its tail: the entries past its head that chain from it are its own (docs/adr/0172).
        heads = log.tails(tenant, log.heads(tenant) if chain is None else {chain: log.head(tenant, chain)})
        # A chain the anchor names is walked even when the table holds no head for it any more.
        chains = sorted(set(heads) | set(anchored)) if chain is None else [chain]
        heads = {k: heads.get(k, rules.Head()) for k in chains}
        ends = {k: max(heads[k].seq, anchored[k].seq if k in anchored else 0) for k in chains}
        walked = rules.entries_walked(ends, from_seq, to_seq)
        if walked > MAX_VERIFY_ENTRIES:
            reach = rules.furthest_walk(ends, from_seq, MAX_VERIFY_ENTRIES)
            raise Invalid(
                f"one verification walks at most {MAX_VERIFY_ENTRIES} entries; fromSeq {from_seq} to toSeq {to_seq} holds "
                f"{walked} over the tenant's chains: verify up to toSeq {reach} and continue from {reach + 1}, or verify "
                "one chain at a time (chain)",
                {"field": "toSeq", "limit": MAX_VERIFY_ENTRIES, "maxToSeq": reach},
            )
        answers = [_verify_chain(log, tenant, k, heads[k], from_seq, to_seq, key, anchored.get(k)) for k in chains]
        anomalies += [a for answer in answers for a in answer["anomalies"]]
        anomalies.sort(key=lambda a: (a["atSeq"], a["detail"]))
        listed = sorted((c for answer in answers for c in answer["checkpoints"]), key=lambda c: (c["atSequence"], c["checkpoint"]))
        result: dict[str, Any] = {
            "fromSeq": from_seq,
            "toSeq": to_seq,
            "chainValid": not anomalies,
            "checkpoints": listed,
            "anomalies": anomalies,
        }
        if listed:
            result["checkpointsValid"] = all(answer.get("checkpointsValid", True) for answer in answers)
        return result

    def _published(self, tenant: str, key: str, from_seq: int) -> tuple[dict[int, rules.Anchored], list[dict[str, Any]]]:
        """The chains the tenant's anchor published (none where no anchor is kept or published yet), and the anomaly of
        an anchor this host's key did not sign for this tenant."""
        published = self.anchors()
        if published is None:
            return {}, []
        try:
            raw = published.read(tenant)
        except Exception as exc:  # noqa: BLE001 - verifying without it would pass what it exists to catch
            caught(logger, "audit-anchor-read", "the audit anchor of tenant %s could not be read", tenant)
            raise Unavailable("the published audit anchor could not be read; retry", retry_after_s=1) from exc
        if raw is None:
            return {}, []
        heads = rules.anchored_heads(key, raw, tenant)
        if heads is None:
            forged = {"atSeq": from_seq, "kind": "signature-invalid", "checkpoint": rules.ANCHOR_ID}
            return {}, [{**forged, "detail": "the published audit anchor is not one this host's key signed for this tenant"}]
        return heads, []

    def entries_page(self, tenant: str, limit: int, cursor: str | None) -> dict[str, Any]:
        """Newest first across the tenant's chains (by `at`; a chain's own entries in their order); `cursor` continues
        after the previous page (docs/adr/0173). Reads the chains' heads (one BatchGetItem per 100), then side by side a
        small page (`chain_page`) of each marked chain with entries left, from its tail in the same Query (`listed`:
        docs/adr/0172), and its tail alone of one listed to its end; a settled chain's page only once the merge reaches
        the moment its head last moved (none of its entries is newer), and any chain's next page only where the merge
        takes its page to the end: the most the page may still take of it, so once a page at most."""
        before = decode_before(cursor, tenant) if cursor is not None else None
        if cursor is not None and before is None:
            raise Invalid("cursor is not one this listing issued", {"field": "cursor"})
        log = self.chains
        heads = log.heads(tenant, consistent=False)
        # Each chain with entries left, and the sequence its page is below (None: from its tail).
        wanted: dict[int, int | None] = dict(before) if before is not None else dict.fromkeys(heads)
        size = chain_page(limit, len(wanted))
        # A settled head is its chain's tail, moved by an append after every entry under it was taken (less the
        # clocks' slack): an upper bound of their `at`. A head an older release wrote does not say when.
        waiting = {
            chain: clock.iso_epoch(head.appended_at + CLOCK_SLACK_S)
            for chain in wanted
            if (head := heads.get(chain)) is not None and not head.marked and head.appended_at is not None
        }

        def read(chain: int) -> Listed:
            head = heads.get(chain, rules.Head())
            if chain in wanted:
                return log.listed(tenant, chain, head, size, wanted[chain])
            # Listed to its end: its tail alone, for `chains`.
            return Listed(log.tails(tenant, {chain: head}, consistent=False)[chain], [], False)

        first = sorted((set(wanted) - set(waiting)) | {chain for chain, head in heads.items() if head.marked})
        pages = dict(zip(first, self._side_by_side(read, first), strict=True))
        streams: dict[int, list[dict[str, Any]]] = {}
        more: dict[int, bool] = {}
        below: dict[int, int] = {}

        def stream(chain: int, page: Listed) -> None:
            if page.entries:
                streams[chain], more[chain], below[chain] = page.entries, page.more, page.entries[0]["_seq"] + 1

        for chain, page in pages.items():
            stream(chain, page)
        taken: list[dict[str, Any]] = []
        position = dict.fromkeys(streams, 0)
        while len(taken) < limit:
            newest = {
                chain: str(streams[chain][position[chain]].get("at", ""))
                for chain in streams
                if position[chain] < len(streams[chain])
            }
            newest.update(waiting)
            if not newest:
                break
            chain = max(newest, key=lambda k: (newest[k], k))
            if chain in waiting:
                del waiting[chain]
                stream(chain, read(chain))
                position[chain] = 0
                continue
            entry = streams[chain][position[chain]]
            taken.append(entry)
            position[chain] += 1
            below[chain] = entry["_seq"]
            if position[chain] == len(streams[chain]) and more[chain] and len(taken) < limit:
                streams[chain], more[chain] = log.newest(tenant, chain, limit - len(taken), below[chain])
                position[chain] = 0
        following = {chain: below[chain] for chain in streams if position[chain] < len(streams[chain]) or more[chain]}
        following.update({chain: wanted[chain] or heads[chain].seq + 1 for chain in waiting})
        tails = {chain: pages[chain].tail if chain in pages else head for chain, head in heads.items()}
        body: dict[str, Any] = {
            "entries": [{k: v for k, v in entry.items() if k != "_seq"} for entry in taken],
            "headSeq": max((tail.seq for tail in tails.values()), default=0),
            "chains": {str(chain): tail.seq for chain, tail in tails.items()},
        }
        if following:
            body["cursor"] = encode_before(following, tenant)
        return body

    def _side_by_side(self, read: Callable[[int], Listed], chains: list[int]) -> list[Listed]:
        return self._concurrently(read, chains) if self._concurrently is not None else [read(chain) for chain in chains]


def chain_page(limit: int, chains: int) -> int:
    """How many entries a page first reads of each of `chains` chains (docs/adr/0173): twice a chain's share of
    `limit`, so that entries spread unevenly over the chains usually fill the page from these reads alone; never fewer
    than an eventually consistent read unit holds (CHAIN_PAGE_MIN: fewer cost the same), nor more than `limit`."""
    return min(limit, max(CHAIN_PAGE_MIN, -(-2 * limit // max(chains, 1))))


def _verify_chain(
    log: AuditChains,
    tenant: str,
    chain: int,
    head: rules.Head,
    from_seq: int,
    to_seq: int,
    key: str,
    anchored: rules.Anchored | None,
) -> dict[str, Any]:
    checkpoints = log.checkpoints(tenant, chain, from_seq, to_seq)
    before: dict[int, int] = {}
    previous = log.checkpoint_before(tenant, chain, checkpoints[0]["atSequence"]) if checkpoints else 0
    for made in checkpoints:
        before[made["atSequence"]] = previous
        previous = made["atSequence"]
    first = min([from_seq - 1, *(p + 1 for p in before.values())])
    end = max(head.seq, anchored.seq if anchored is not None else 0)
    entries = dict(log.entries(tenant, chain, max(first, 1), min(to_seq, end)))
    answer = rules.walk(from_seq, to_seq, entries, checkpoints, head, key, lambda at: before[at], chain, anchored)
    for anomaly in answer["anomalies"]:
        anomaly["detail"] = f"chain {chain}" + (f": {anomaly['detail']}" if anomaly.get("detail") else "")
    return answer


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = ["AuditTrail"]
