"""A write that carries an Idempotency-Key: the answer to it is committed in the effect's own transaction.

The edge knows how an operation's result becomes an answer (`render`); the operation knows its result just
before it commits (the transition is decided, the answer follows from it). So the operation renders the answer,
hands the store an AnsweredRecord to commit with the effect, and marks it sealed once the commit succeeded.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from interlude.store.idempotency import AnsweredRecord, CachedResponse, IdempotencyKey


class KeyedWrite(NamedTuple):
    key: IdempotencyKey
    now_ms: int
    render: Callable[[Any], CachedResponse]
    # The committed answer, shared with every write mapped from this one (a face maps its own answer in): the
    # request's own list (api/idempotency.py), which the edge reads once the operation returns or fails.
    sealed: list[CachedResponse]

    def map(self, shape: Callable[[Any], Any]) -> "KeyedWrite":
        """The same write, answering with what `shape` makes of the operation's result."""
        return KeyedWrite(self.key, self.now_ms, lambda result: self.render(shape(result)), self.sealed)

    def answered(self, result: Any) -> AnsweredRecord:
        return AnsweredRecord(self.key, self.render(result), self.now_ms)

    def committed(self, record: AnsweredRecord) -> None:
        self.sealed.append(record.answer)


def answered(keyed: KeyedWrite | None, result: Any) -> AnsweredRecord | None:
    return None if keyed is None else keyed.answered(result)


def committed(keyed: KeyedWrite | None, record: AnsweredRecord | None) -> None:
    if keyed is not None and record is not None:
        keyed.committed(record)
