"""Play the SQS → Lambda event source mappings that moto does not run, from wiring's declaration, and serve their
batches as SQS fair queues do (FairQueue), which moto does not either.

The queues are created in moto as wiring declares them (the same redrive policy, so moto moves a message to the
dead-letter queue after maxReceiveCount receives, as SQS would). A pump per consuming function long-polls its
queue, invokes the real handler with an SQS event of the mapping's batch size, and deletes the messages the
handler did not report as failed, exactly as the mapping does; failed messages stay hidden for whatever
visibility timeout the handler set, and an invocation that raises leaves the whole batch to reappear.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3

from interlude import wiring
from interlude.config.local import export, local_stack_settings
from interlude.local import LOCAL_REGION
from interlude.local.lambda_runtime import InstancePool, invoke
from interlude.local.pump import SQS, Pump, queue_name, wake_pumps

# moto shows a message again once its visibility time has passed (strictly): the pump wakes this much after it.
VISIBLE_MARGIN_S = 0.01


def physical_name(prefix: str, queue: wiring.Queue) -> str:
    return f"{prefix}-{queue.name}"


def create_queues(client: Any, prefix: str) -> dict[str, str]:
    """Create every wiring.QUEUES queue (dead-letter targets first); returns name -> URL."""
    urls: dict[str, str] = {}
    for queue in wiring.queues_in_creation_order():
        attributes = {
            "MessageRetentionPeriod": str(queue.retention_s),
            "VisibilityTimeout": str(queue.visibility_timeout_s),
        }
        if queue.dead_letter:
            target = client.get_queue_attributes(QueueUrl=urls[queue.dead_letter], AttributeNames=["QueueArn"])
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": target["Attributes"]["QueueArn"], "maxReceiveCount": queue.max_receive_count}
            )
        urls[queue.name] = client.create_queue(QueueName=physical_name(prefix, queue), Attributes=attributes)[
            "QueueUrl"
        ]
    return urls


def export_queue_urls(urls: dict[str, str]) -> None:
    """Hand each queue's URL to the handlers in this process, under the variable the stack sets."""
    for queue in wiring.QUEUES:
        export({queue.url_env: urls[queue.name]})


def to_event_record(message: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": LOCAL_REGION,
    }


class FairQueue:
    """Which visible messages a receive returns, as Amazon SQS fair queues choose (standard queues whose messages
    carry a MessageGroupId; "How Amazon SQS fair queues work", SQS Developer Guide), which moto does not model.

    A message's tenant is its MessageGroupId (one without is a tenant of its own). A tenant is a *noisy neighbor*
    while it holds more than 10 % of the messages in flight and at least 30 of them, or its recent share of the
    consumers' processing time is over 10 %. A receive returns quiet tenants' messages first (oldest first), then
    noisy tenants', the one with the fewest messages in flight first. Nothing is dropped or delayed otherwise: with
    no quiet tenant waiting, noisy tenants' messages are served as usual. "Recent" is WINDOW_S here (AWS gives no
    figure); a tenant that stops sending leaves the window, and so stops being noisy, within it.
    """

    SHARE = 0.10
    MIN_IN_FLIGHT = 30
    WINDOW_S = 60.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.in_flight: Counter[str] = Counter()
        # (when, tenant, seconds of processing), and their sums per tenant: a receive asks each tenant's share, which
        # summing the window's batches each time cost ≈ 2 % of a busy stack's CPU.
        self.busy: deque[tuple[float, str, float]] = deque()
        self._busy_by_tenant: defaultdict[str, float] = defaultdict(float)

    @staticmethod
    def tenant(message: Mapping[str, Any]) -> str:
        group = (message.get("Attributes") or {}).get("MessageGroupId")
        return str(group) if group else "\x00" + str(message["MessageId"])

    def noisy(self, tenant: str) -> bool:
        flying = self.in_flight.total()
        if flying and self.in_flight[tenant] >= self.MIN_IN_FLIGHT and self.in_flight[tenant] > self.SHARE * flying:
            return True
        self._forget_old()
        total = sum(self._busy_by_tenant.values())
        return total > 0 and self._busy_by_tenant.get(tenant, 0.0) > self.SHARE * total

    def choose(self, visible: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
        """The `count` messages a receive returns from `visible` (oldest first)."""
        noisy = {t: self.noisy(t) for t in {self.tenant(m) for m in visible}}

        def rank(pair: tuple[int, dict[str, Any]]) -> tuple[bool, int, int]:
            tenant = self.tenant(pair[1])
            return (noisy[tenant], self.in_flight[tenant] if noisy[tenant] else 0, pair[0])

        return [message for _, message in sorted(enumerate(visible), key=rank)[:count]]

    def taken(self, messages: list[dict[str, Any]]) -> None:
        self.in_flight.update(self.tenant(m) for m in messages)

    def settled(self, messages: list[dict[str, Any]], seconds: float) -> None:
        """`messages` are no longer in flight; their batch took `seconds` of a consumer, shared among them."""
        now = self.clock()
        for m in messages:
            tenant = self.tenant(m)
            self.in_flight[tenant] -= 1
            if self.in_flight[tenant] <= 0:
                del self.in_flight[tenant]
            share = seconds / len(messages)
            self.busy.append((now, tenant, share))
            self._busy_by_tenant[tenant] += share

    def _forget_old(self) -> None:
        horizon = self.clock() - self.WINDOW_S
        while self.busy and self.busy[0][0] < horizon:
            _, tenant, share = self.busy.popleft()
            self._busy_by_tenant[tenant] -= share
            if self._busy_by_tenant[tenant] <= 0:
                del self._busy_by_tenant[tenant]
        if not self.busy:
            self._busy_by_tenant.clear()  # no float left over from adding and subtracting


class QueuePump(Pump):
    """One function's SQS event source mapping: receives batches the way a fair queue serves them, invokes the
    handler with up to `concurrency` batches at once (the mapping's maximum concurrency), and deletes what the
    handler did not report as failed. Each concurrent batch has an instance of its own, as in Lambda: the first
    runs in this process, the others in processes started the first time they are needed (a stack that is never
    busy starts none).

    What moto would return next is not what a fair queue returns, so the pump holds up to BUFFERED of the queue's
    visible messages it has received (their visibility renewed while they wait) and chooses each batch among them
    with FairQueue. A held message counts as visible, not in flight, until it is chosen."""

    BUFFERED = 200

    def __init__(
        self,
        function_name: str,
        queue_url: str,
        interval_s: float = 0.05,
        batch_size: int = 1,
        concurrency: int = 1,
        clock: Callable[[], float] = time.monotonic,
        next_visible: Callable[[str], float | None] | None = None,
    ) -> None:
        super().__init__(f"sqs-pump-{function_name}", interval_s, backs_off=True, carries=SQS)
        self.function_name = function_name
        self.queue_url = queue_url
        # Woken by a write to its own queue only (moto_server.written_queue).
        self.queue_name = self.target = queue_name(queue_url)
        # When the earliest hidden message of a queue (by name) becomes visible, epoch seconds (LockedMotoServer's);
        # None: not known, and an idle pump backs off as any other.
        self.next_visible = next_visible
        self.sqs = boto3.client("sqs")
        attributes = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn", "VisibilityTimeout"])
        self.queue_arn = attributes["Attributes"]["QueueArn"]
        self.visibility_s = int(attributes["Attributes"]["VisibilityTimeout"])
        self.batch_size = batch_size
        self.clock = clock
        self.fair = FairQueue(clock)
        # MessageId -> (the message as last received, when)
        self.held: dict[str, tuple[dict[str, Any], float]] = {}
        self.concurrency = concurrency
        self._lock = threading.Lock()
        # Instance 0 is this process; 1.. are the pool's processes.
        self._free = list(range(concurrency))
        self._pool: InstancePool | None = None
        self._workers = ThreadPoolExecutor(concurrency, f"sqs-{function_name}") if concurrency > 1 else None
        # Batches handed to the workers whose delivery has not ended.
        self._handed_on = 0

    def pump_once(self) -> int:
        """Hand out as many batches as there are free instances; returns how many messages went."""
        self._fill()
        moved = 0
        while True:
            with self._lock:
                if not self.held or not self._free:
                    return moved
                instance = self._free.pop(0)
                messages = self.fair.choose([m for m, _ in self.held.values()], self.batch_size)
                for m in messages:
                    del self.held[m["MessageId"]]
                self.fair.taken(messages)
                if self._workers is not None:
                    self._handed_on += 1
            moved += len(messages)
            if self._workers is None:
                self._deliver(messages, instance)
                return moved
            self._workers.submit(self._handed_on_delivery, messages, instance)

    def in_flight(self) -> bool:
        with self._lock:
            return self._handed_on > 0

    def sleep_s(self, backoff_s: float) -> float | None:
        """Until a message hidden now (in flight, failed and hidden for a while, or delayed) becomes visible, or one it
        holds needs its visibility renewed; what is sent meanwhile wakes it."""
        if self.next_visible is None:
            return backoff_s
        moments = []
        with self._lock:
            if self.held:
                moments.append(min(at for _, at in self.held.values()) + self.visibility_s / 2 - self.clock())
        visible = self.next_visible(self.queue_name)
        if visible is not None:
            moments.append(visible - time.time() + VISIBLE_MARGIN_S)
        return max(0.0, min(moments)) if moments else None

    def _handed_on_delivery(self, messages: list[dict[str, Any]], instance: int) -> None:
        # Counted until all it does has ended (its deletes, its wake_pumps), so that a poll it outlives is not empty.
        try:
            self._deliver(messages, instance)
        finally:
            with self._lock:
                self._handed_on -= 1

    def stop(self) -> None:
        super().stop()
        if self._workers is not None:
            # Deliveries already running finish before the stack stops the parts they call (moto first of all): a
            # delivery cut off by a stopped endpoint would log a failure the stack's user never caused.
            self._workers.shutdown(wait=True, cancel_futures=True)
        if self._pool is not None:
            self._pool.stop()

    def _invoke(self, event: dict[str, Any], instance: int) -> Any:
        if instance == 0:
            return invoke(self.function_name, event)
        with self._lock:
            if self._pool is None:
                self._pool = InstancePool(self.function_name, self.concurrency - 1)
        return self._pool.invoke(event)

    def _deliver(self, messages: list[dict[str, Any]], instance: int) -> None:
        records = [to_event_record(m, self.queue_arn) for m in messages]
        started = self.clock()
        try:
            result = self._invoke({"Records": records}, instance) or {}
        except Exception:
            # Lambda leaves the whole batch on the queue; it reappears after its visibility timeout.
            result = None
        finally:
            with self._lock:
                self.fair.settled(messages, self.clock() - started)
                self._free.append(instance)
                self._free.sort()
        if result is not None:
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            done = [r for r in records if r["messageId"] not in failed]
            if done:
                self.sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)],
                )
        if self._workers is not None:
            wake_pumps(SQS, self.target)  # a free instance: the next batch goes now, not at the next idle poll

    def _fill(self) -> None:
        """Receive what is visible, up to BUFFERED held; renew the visibility of what has been held a while."""
        now = self.clock()
        with self._lock:
            stale = [m for m, at in self.held.values() if now - at > self.visibility_s / 2]
            room = self.BUFFERED - len(self.held)
        for start in range(0, len(stale), 10):
            chunk = stale[start : start + 10]
            entries: Any = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": self.visibility_s}
                for i, m in enumerate(chunk)
            ]
            self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
            with self._lock:
                for m in chunk:
                    if m["MessageId"] in self.held:
                        self.held[m["MessageId"]] = (m, now)
        while room > 0:
            got: list[Any] = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, room),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            with self._lock:
                for m in got:
                    self.held[m["MessageId"]] = (m, now)
            room -= len(got)
            if len(got) < 10:
                return


def start_queue_pumps(
    urls: dict[str, str], next_visible: Callable[[str], float | None] | None = None
) -> list[QueuePump]:
    """A pump per queue a function consumes; with delivery off, the outbox's alone (it calls out to nobody).
    `next_visible`: when a queue's earliest hidden message becomes visible (LockedMotoServer.next_visible)."""
    switches = local_stack_settings()
    pumps = []
    for fn in wiring.FUNCTIONS:
        if not fn.consumes or not (switches.callback_delivery or fn.consumes == wiring.OUTBOX_QUEUE):
            continue
        pump = QueuePump(
            fn.name,
            urls[fn.consumes],
            batch_size=fn.batch_size,
            concurrency=switches.queue_concurrency,
            next_visible=next_visible,
        )
        pumps.append(pump.start())
    return pumps
