"""Every state change is one conditional TransactWriteItems (design §4): written here, with what may travel in it.

A transaction is a list of labelled TransactWriteItems (label, item); the label names the item in a refusal. With
it may go an Idempotency-Key record (store/idempotency.py: the request's answer lands with its effect), an audit
entry (store/audit.py: the action and its entry land together or not at all) and a quota's claim (store/limits.py:
named in the refusal when the tenant is at its limit). A refusal is raised as what it means: TooLarge,
KeyAlreadyUsed, the quota's, or LostRace (another writer won a condition).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, cast

from botocore.exceptions import ClientError

from interlude.domain.audit import AuditDraft
from interlude.domain.budgets import ITEM_BUDGET, TRANSACT_MAX_ITEMS, TRANSACTION_BUDGET
from interlude.domain.built_once import built_once
from interlude.domain.errors import TooLarge, Unavailable
from interlude.rules.audit import Head
from interlude.rules.limits import quota_exceeded
from interlude.store import attributes as a
from interlude.store import audit as audit_log
from interlude.store import idempotency
from interlude.store import limits as counters
from interlude.store.idempotency import AnsweredRecord, KeyAlreadyUsed
from interlude.store.layout import INTERRUPT_SK_PREFIX, RUN_SK, SECOND
from interlude.store.table import Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# A labelled TransactWriteItem: (label, {"Put" | "Update" | "Delete" | "ConditionCheck": body}).
Labelled = tuple[str, dict[str, Any]]

# DynamoDB's item limit is 400 KB; keep a margin for attribute names and numbers.
MAX_ITEM_BYTES = 380_000
# TransactionConflict: another transaction held one of the items (the tenant's usage counter is shared by its
# run creations and endings); nothing was written, so the transaction is sent again.
TRANSACTION_CONFLICT_RETRIES = 5
QUOTA_NOUNS = {counters.OPEN_RUNS: "open runs", counters.WORKFLOW_VERSIONS: "stored workflow versions"}


@dataclass
class LostRace(Exception):
    """A transaction lost a condition to another writer. `reasons` holds, per failed item, its label and old image.

    Not domain.errors.Conflict: a lost race is the store's fact, which its caller turns into the refusal it means
    (or a retry)."""

    reasons: list[tuple[str, dict[str, Any] | None]]

    def interrupt_old_image(self) -> dict[str, Any] | None:
        return next((old for sk, old in self.reasons if sk.startswith(INTERRUPT_SK_PREFIX)), None)

    def head_old_image(self) -> dict[str, Any] | None:
        """The run head as the winner left it (its state unpacked), when its condition failed."""
        return next((old for sk, old in self.reasons if sk == RUN_SK), None)


def approximate_size(item: a.Item) -> int:
    size = 0
    for name, typed in item.items():
        value = next(iter(typed.values()))
        size += len(name) + (len(value) if isinstance(value, bytes) else len(str(value).encode("utf-8", "surrogatepass")))
    return size


def within_one_item(written: a.Item) -> None:
    """Refuse as TooLarge, before anything is sent, what one stored item cannot hold (a put's item, an update's values)."""
    if approximate_size(written) > MAX_ITEM_BYTES:
        raise TooLarge("the run's state would exceed what one stored item can hold (400 KB)", dict(ITEM_BUDGET))


class TransactionalTable(Table):
    def __init__(self, table_name: str, entries_table_name: str, client: Any = None) -> None:
        super().__init__(table_name, entries_table_name, client)
        # Called with (tenant, chain, head written) after every committed audit append (interlude.app.audit
        # checkpoints).
        self.after_audit: Callable[[str, int, Head], None] | None = None

    @built_once
    def audit_log(self) -> audit_log.AuditLog:
        return audit_log.AuditLog(self.table, self.client)

    def transact(self, items: list[Labelled], audit: AuditDraft) -> None:
        """Write labelled TransactWriteItems (sort key, item) and append `audit` to its tenant's log in the same
        transaction: the action and its audit entry land together or not at all. Raises LostRace when one of
        `items`' conditions fails."""
        self._transact(items, audit=audit)

    def _transact(
        self,
        items: list[Labelled],
        answered: AnsweredRecord | None = None,
        quota: tuple[str, int] | None = None,
        audit: AuditDraft | None = None,
    ) -> None:
        """`quota`: (counter, limit) of the usage claim among `items`, named in the refusal if its condition fails.
        `audit`: an entry appended to its tenant's log in the same transaction (store/audit.py)."""
        if audit is None:
            self._transact_once(items, answered, quota)
        else:
            self._transact_with_audit(items, answered, quota, audit)

    def _transact_with_audit(
        self, items: list[Labelled], answered: AnsweredRecord | None, quota: tuple[str, int] | None, audit: AuditDraft
    ) -> None:
        chain = audit_log.chain_of(audit)
        head: Head | None = None
        orphans: audit_log.Orphans | None = None
        for _ in range(audit_log.APPEND_RETRIES):
            if head is None:
                head = self.audit_log.head(audit.tenant, chain)
                orphans = self.audit_log.beyond(audit.tenant, chain, head)  # a head that may lag: past it (ADR 0172)
            appended, written = audit_log.append_items(audit, chain, head, time.time(), orphans)
            try:
                self._transact_once([*items, *appended], answered, quota)
            except LostRace as lost:
                if {label for label, _ in lost.reasons} <= audit_log.APPEND_LABELS:
                    # Another append moved the head first: the failure carries the head it moved to (ALL_OLD), so the
                    # entry is placed after it without reading again. The head held but the entry's place was taken:
                    # orphans lie beyond it (store/audit.py), read to be adopted.
                    moved = [old for label, old in lost.reasons if label == audit_log.HEAD_SK]
                    head = audit_log.head_of_plain(moved[0]) if moved else self.audit_log.head(audit.tenant, chain)
                    orphans = None if moved else self.audit_log.orphans(audit.tenant, chain, head)
                    continue
                raise
            if self.after_audit is not None:
                self.after_audit(audit.tenant, chain, written)
            return
        raise Unavailable("the audit log kept moving while appending; retry", retry_after_s=1)

    def _transact_once(
        self, items: list[Labelled], answered: AnsweredRecord | None, quota: tuple[str, int] | None
    ) -> None:
        if answered is not None:
            items = [*items, (idempotency.SORT_KEY, {"Put": idempotency.record_put(answered)})]
        transact_items = self._checked(items)
        for attempt in range(TRANSACTION_CONFLICT_RETRIES + 1):
            try:
                self.client.transact_write_items(TransactItems=transact_items)
                return
            except ClientError as exc:
                if attempt < TRANSACTION_CONFLICT_RETRIES and a.only_transaction_conflicts(exc):
                    time.sleep(random.uniform(0, 0.02 * 2**attempt))
                    continue
                _refusal(items, exc, answered, quota)

    def _checked(self, items: list[Labelled]) -> list[TransactWriteItemTypeDef]:
        """The items as sent, on this table and, those with a condition, returning their old image when it fails;
        refused as TooLarge, before anything is sent, past what one transaction or one item holds. An item without a
        condition (a counter's release) cannot fail one: asking for its old image would only be one more parameter
        for the client to serialise and DynamoDB to parse in every such transaction (docs/adr/0162)."""
        if len(items) > TRANSACT_MAX_ITEMS:
            # The budgets keep every counted path under it (domain/budgets.py); one they miss is refused here, before
            # anything is sent, as what it is, rather than as DynamoDB's ValidationException (a 500 at the edge).
            raise TooLarge(
                f"this change would write {len(items)} items at once; one transaction holds at most {TRANSACT_MAX_ITEMS}",
                dict(TRANSACTION_BUDGET),
            )
        for _, op in items:
            body = next(iter(op.values()))
            # An item of a family in the second table names it by its mark (store/layout.py), or by its name once
            # checked (an audited transaction's items are checked again on each retry of its append); the rest are the
            # first's.
            in_second = body.get("TableName") in (SECOND, self.entries_table)
            body["TableName"] = self.entries_table if in_second else self.table
            if "ConditionExpression" in body:
                body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            # What an update sets counts toward its item as much as what a put writes (the run head is updated).
            written = body.get("Item") or body.get("ExpressionAttributeValues")
            if written:
                within_one_item(written)
        # The items are built by hand in the low-level shape (store/attributes.py), as plain dicts.
        return cast("list[TransactWriteItemTypeDef]", [op for _, op in items])


def _refusal(
    items: list[Labelled], exc: ClientError, answered: AnsweredRecord | None, quota: tuple[str, int] | None
) -> NoReturn:
    """Raise what a failed transaction means: too large, a key used first, a quota, a lost race, or the error
    itself."""
    refuse_if_too_large(exc)
    failed = _condition_failures(items, exc)
    if not failed:
        raise exc
    if answered is not None:
        for label, old in failed:
            if label == idempotency.SORT_KEY:
                raise KeyAlreadyUsed(idempotency.existing_of(old, answered.key.digest)) from exc
    if quota is not None and any(sk == counters.USAGE_SK for sk, _ in failed):
        counter, limit = quota
        message = f"this tenant has reached its limit of {limit} {QUOTA_NOUNS[counter]}"
        raise quota_exceeded(counter, limit, message) from None
    raise LostRace(failed) from exc


def refuse_if_too_large(exc: ClientError) -> None:
    """Raise TooLarge when DynamoDB refused a write (a transaction, a BatchWriteItem: either writes nothing then) for an
    item past what it stores, which `within_one_item`'s estimate let through."""
    error = exc.response["Error"]
    if error["Code"] == "ValidationException" and "size" in error.get("Message", "").lower():
        raise TooLarge("the run's state exceeds what DynamoDB can store in one item", dict(ITEM_BUDGET)) from None


def _condition_failures(items: list[Labelled], exc: ClientError) -> list[tuple[str, dict[str, Any] | None]]:
    """The items whose condition failed when a transaction lost a race, with their old images; [] if it did not."""
    if exc.response["Error"]["Code"] != "TransactionCanceledException":
        return []
    # botocore-stubs type a reason's Item as {key, value}; DynamoDB sends the old item's attribute map.
    reasons = cast("list[dict[str, Any]]", exc.response.get("CancellationReasons") or [])
    failed = [
        (items[i][0], a.plain(r["Item"]) if r.get("Item") else None)
        for i, r in enumerate(reasons)
        if r.get("Code") == "ConditionalCheckFailed"
    ]
    # A cancellation that names no reasons is taken as a lost race on the run head.
    return failed or ([(RUN_SK, None)] if not reasons else [])
