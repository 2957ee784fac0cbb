"""moto's SQS made to cost what a call touches, for the local stack and in-process tests only (moto_patches applies it).

moto 5.x computes every attribute of a queue, the three approximate counts among them (each a pass over all its
messages, two clock reads per message), whenever one attribute is read: on every message sent (ContentBasedDeduplication)
and three times per message received (the retention check reads MessageRetentionPeriod). A receive lists every visible
message before it takes the first ten, and a delete or a visibility change looks for its receipt handle in every
message. A queue of n messages therefore cost O(n) per message moved and O(n²) to drain: 7,500 outbox messages (the
5,000 seeded runs of bench/local_load.py) held moto's one lock for minutes while every request of the stack waited.
SQS costs the same per message however long the queue.

Here a queue's attributes are computed when one is read (the same names and values), a receive walks the messages
only until it has what it takes (the messages in flight before them still cost a look each: as many as the consumers
hold), and a receipt handle finds its message through an index kept as handles are issued. Answers, errors, order and
counts are moto's own: tests/integration/test_moto_patches.py runs the same SQS calls with and without these patches,
compares every answer, and counts the messages each call examines beside a short and a long queue.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from moto.core.utils import camelcase_to_underscores
from moto.sqs.exceptions import ReceiptHandleIsInvalid
from moto.sqs.models import Message, Queue, SQSBackend

_original_mark_received = Message.mark_received
# Every receipt handle moto issued -> its message (moto keeps a message's earlier handles valid, and so does this).
_by_handle: weakref.WeakValueDictionary[str, Message] = weakref.WeakValueDictionary()


def apply() -> None:
    # Replacing methods on moto's classes is the point of this module; mypy forbids assigning to a method.
    Queue.attributes = property(_QueueAttributes)  # type: ignore[assignment,method-assign]
    Queue.messages = property(_VisibleMessages)  # type: ignore[assignment,method-assign]
    Queue.delete_message = _delete_message  # type: ignore[method-assign]
    Message.mark_received = _mark_received  # type: ignore[method-assign]
    SQSBackend.change_message_visibility = _change_message_visibility  # type: ignore[method-assign]


class _QueueAttributes(Mapping[str, Any]):
    """What moto's Queue.attributes returns, each value computed when it is read."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        names = list(Queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += Queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:  # type: ignore[attr-defined]
            names += Queue.KMS_ATTRIBUTES
        self._names = dict.fromkeys(names)

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        value = getattr(self._queue, camelcase_to_underscores(name))
        if name == "RedrivePolicy" and value:
            return json.dumps(value)
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class _VisibleMessages:
    """moto's Queue.messages (visible, not delayed, in queue order), found while iterated instead of listed first."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue

    def __iter__(self) -> Iterator[Message]:
        # A copy of the list (pointers only): the caller may move a message to the dead-letter queue afterwards.
        return (m for m in list(self._queue._messages) if m.visible and not m.delayed)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None


def _mark_received(self: Message, visibility_timeout: int | None = None) -> None:
    _original_mark_received(self, visibility_timeout)
    assert self.receipt_handle is not None
    _by_handle[self.receipt_handle] = self


def _holder(queue: Queue, receipt_handle: str) -> Message | None:
    """The message of `queue` that was ever given `receipt_handle` (moto's `had_receipt_handle`)."""
    message = _by_handle.get(receipt_handle)
    # `in` compares by identity here (Message defines no __eq__): one pass in C, not a call per message.
    return message if message is not None and message in queue._messages else None


def _delete_message(self: Queue, receipt_handle: str) -> None:
    if receipt_handle in self.deleted_messages:
        return  # already deleted: moto accepts it again, as SQS does
    message = _holder(self, receipt_handle)
    if message is None:
        raise ReceiptHandleIsInvalid()
    self._messages.remove(message)
    self.pending_messages.discard(message)
    self.deleted_messages.update(message.all_receipt_handles)  # type: ignore[arg-type]


_original_change_message_visibility = SQSBackend.change_message_visibility


def _change_message_visibility(self: SQSBackend, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
    queue = self.get_queue(queue_name)
    message = _holder(queue, receipt_handle)
    if message is None:
        raise ReceiptHandleIsInvalid
    # moto's own, which finds the same message first in the queue and applies its checks and the change to it.
    saved = queue._messages
    queue._messages = [message]
    try:
        _original_change_message_visibility(self, queue_name, receipt_handle, visibility_timeout)
    finally:
        queue._messages = saved
