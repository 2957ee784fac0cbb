"""Leased work, the worker's side: one SQS message names one unit of work (a callback or webhook delivery, a
notification, an action), which succeeds at most once however many copies of the message arrive, is retried later
while it fails, and is dead-lettered when its attempts run out.

`LeasedWorker.handle` is the one way every such worker goes: claim the unit's next attempt under a lease (its ledger
item, store.leases), attempt it, settle the attempt. A unit settled already is not attempted again (`replay`); one
whose lease another worker holds is retried later, once that lease has run out. A failed attempt is settled as
pending and retried later: the message is hidden for a backoff (its visibility timeout is the not-before) and
reported as a batch item failure, so SQS hands it out again. After the last attempt, or a failure no retry can
change, comes the dead letter; a unit reopened after it (app.replay) is claimed again as its next attempt, with a
round of attempts of its own. A worker says what its unit is (`receive`), what one attempt does (`attempt`) and
what its dead letter keeps (`send_dead_letter`).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NoReturn, Protocol, TypeVar

from interlude.adapters.held_work import read_message
from interlude.store.leases import PENDING, Claim, Ledger, round_attempt

DEAD = "dead"
# SQS caps a message's visibility timeout at 12 hours.
MAX_VISIBILITY_S = 12 * 3600

Ref = TypeVar("Ref")


class RetryLater(Exception):
    """The message stays on the queue (hidden until it is to be tried again); report it as a failed item."""


class OutOfTime(Exception):
    """The invocation has no time left for the attempt: nothing was attempted, and the message is handed out again at
    once (to an invocation with time for it), no attempt counted."""


class QueueSettings(Protocol):
    @property
    def queue_url(self) -> str: ...
    @property
    def backoff_base_s(self) -> float: ...
    @property
    def backoff_cap_s(self) -> float: ...


@dataclass(frozen=True)
class Work(Generic[Ref]):
    """One unit of work, as its message names it."""

    ref: Ref  # what its ledger knows it by
    label: str  # what RetryLater's text calls it: "notice …", "notification …", "effect …"
    lease_s: float  # an attempt's bound, with a margin: a slow attempt is never claimed twice
    max_attempts: int


@dataclass(frozen=True)
class Attempted:
    """What one attempt came to."""

    # The status the unit settles as; None: the attempt failed, and another may follow.
    status: str | None
    # What settling writes with it: the worker's own record of the attempt (its ledger says where it goes).
    kept: dict[str, Any]
    # Failed so that no retry can change it: dead-lettered now.
    final: bool = False
    # The far side asked for at least this long before the next attempt (Retry-After, seconds).
    retry_after_s: int | None = None
    # The failure's class, for RetryLater's text.
    why: str = ""
    # The failed attempt's number within its round, when the worker counts it (a bundle's: its pending notice's own);
    # None: the claim's (round_attempt).
    in_round: int | None = None


W = TypeVar("W", bound=Work[Any])


class LeasedWorker(ABC, Generic[W]):
    sqs: Any
    settings: QueueSettings
    clock: Callable[[], float]
    rand: Callable[[], float]
    # Hide the message for the lease before attempting, so a worker killed mid-attempt leaves a message that
    # reappears once its lease has run out (a queue whose visibility timeout already covers the lease needs none).
    HIDE_FOR_LEASE: ClassVar[bool] = False
    # Claim each attempt under a lease before making it, so two copies of a unit's message never attempt it at the
    # same moment. A worker whose unit may be done twice (its far side deduplicates) records each attempt after it
    # instead, in one write (store.leases.Ledger.record; ADR 0129).
    CLAIMS: ClassVar[bool] = True
    # What its messages are called where one is refused (interlude.adapters.held_work.read_message).
    MESSAGE: ClassVar[str]

    @property
    @abstractmethod
    def ledger(self) -> Ledger[Any]: ...

    @abstractmethod
    def receive(self, message: dict[str, Any]) -> W | str:
        """The unit of work `message` names, or the outcome when there is nothing to do."""

    @abstractmethod
    def attempt(self, work: W, claim: Claim) -> Attempted: ...

    def received(self, record: dict[str, Any]) -> W | str:
        """`receive` of the SQS record's message (a worker that weighs the record's receives says so here)."""
        return self.receive(read_message(record["body"], self.MESSAGE))

    def handle(self, record: dict[str, Any]) -> str:
        """Process one SQS record: returns the outcome, or raises RetryLater."""
        work = self.received(record)
        if isinstance(work, str):
            return work
        if self.CLAIMS:
            claim = self.ledger.claim(work.ref, self.clock(), work.lease_s)
        else:
            claim = self.ledger.look(work.ref, self.clock())
        if claim.outcome == "settled":
            return self.replay(work, claim)
        if claim.outcome == "busy":
            self.retry_later(record, claim.retry_in_s, f"{work.label} is leased by another worker")
        if self.HIDE_FOR_LEASE:
            self.hide(record, work.lease_s)
        try:
            attempted = self.attempt(work, claim)
        except OutOfTime:
            self.retry_later(record, 0, f"{work.label} waits for an invocation with time for its attempt")
        if attempted.status is not None:
            return self.settle(work, claim, attempted.status, attempted.kept)
        # A unit reopened after its dead letter (store.leases.Ledger.reopen) has a round of attempts of its own.
        in_round = round_attempt(claim) if attempted.in_round is None else attempted.in_round
        if attempted.final or in_round >= work.max_attempts:
            return self.dead_letter(work, claim, attempted)
        if self.write_outcome(work, claim, PENDING, attempted.kept) not in (PENDING, None):
            # Another copy of the message settled the unit meanwhile (a worker that records): nothing left to retry.
            return "duplicate"
        cfg = self.settings
        delay = backoff_s(in_round, cfg.backoff_base_s, cfg.backoff_cap_s, self.rand)
        if attempted.retry_after_s is not None:
            delay = max(delay, min(attempted.retry_after_s, int(cfg.backoff_cap_s)))
        self.retry_later(record, delay, f"attempt {claim.attempt} of {work.label} failed ({attempted.why})")

    def replay(self, work: W, claim: Claim) -> str:
        """A copy of a message whose unit is settled already."""
        return "duplicate"

    def settle(self, work: W, claim: Claim, status: str, kept: dict[str, Any]) -> str:
        ended = self.write_outcome(work, claim, status, kept)
        return status if ended in (status, None) else "duplicate"

    def write_outcome(self, work: W, claim: Claim, status: str, kept: dict[str, Any]) -> str | None:
        """The attempt's outcome written (settled under the claim, or recorded): the status the unit holds after it;
        None when it was not written (a claim that no longer stands, or a record that lost every round)."""
        if self.CLAIMS:
            return status if self.ledger.settle(work.ref, claim.attempt, status, kept, self.clock(), claim.held) else None
        return self.ledger.record(work.ref, claim, status, kept, self.clock())

    def dead_letter(self, work: W, claim: Claim, attempted: Attempted) -> str:
        # The dead letter goes first: a crash after it leaves a duplicate dead letter, never a lost one.
        self.send_dead_letter(work, attempted)
        return self.settle(work, claim, DEAD, attempted.kept)

    def send_dead_letter(self, work: W, attempted: Attempted) -> None:
        """Keep what an operator needs of a unit that failed for good (no body, token or secret)."""
        raise NotImplementedError

    def retry_later(self, record: dict[str, Any], seconds: float, why: str) -> NoReturn:
        self.hide(record, seconds)
        raise RetryLater(why)

    def hide(self, record: dict[str, Any], seconds: float) -> None:
        self.sqs.change_message_visibility(
            QueueUrl=self.settings.queue_url,
            ReceiptHandle=record["receiptHandle"],
            VisibilityTimeout=max(0, min(int(seconds + 0.999), MAX_VISIBILITY_S)),
        )


def backoff_s(attempt: int, base_s: float, cap_s: float, rand: Callable[[], float] = random.random) -> int:
    """Seconds to wait after failed attempt `attempt` (1-based): exponential, capped, with equal jitter."""
    ceiling = min(cap_s, base_s * 2 ** max(attempt - 1, 0))
    return max(0, int(round(ceiling / 2 + rand() * ceiling / 2)))


def retry_after_s(header: str | None) -> int | None:
    """A Retry-After header's seconds (its date form is not honoured)."""
    seconds = (header or "").strip()
    # ASCII digits only: a header is read as Latin-1, whose superscripts (², ³, ¹) str.isdigit takes and int refuses.
    return int(seconds) if seconds.isascii() and seconds.isdigit() else None
