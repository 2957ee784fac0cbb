"""Print how long a long pass over the table takes from turn to turn: the table's migrations, and the daily retention
sweep, each through the real `migrate` handler as its queue takes it.

A table of ITEMS items, read in pages of the release's 1,000; each page holds the turn PAGE_S, long enough that a turn
(pages until two minutes of its 15 are left) holds a few, as a turn over a large table holds many: what is measured is
what each boundary between turns costs, however many pages a turn takes. Between turns
the next waits what its message's delay says (the queue's DelaySeconds, read as the handler sent it), and a turn that
finds the pass held by another runner queues itself again. The clock is the process's offset file, moved by each page
and each delay, never slept; the handler runs against moto in-process.
Usage: .venv/bin/python bench/migration_turns.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from _bench import movable_clock, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import sdk_clients, wiring  # noqa: E402
from interlude.domain import clock  # noqa: E402
from interlude.store import attributes as a  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402

ITEMS = 5_000
PAGE_S = 300.0
TIMEOUT_MS = wiring.function("migrate").timeout_s * 1000


class Turn:
    """A turn's Lambda context on the bench's clock: the function's time, less what its pages took."""

    def __init__(self, number: int) -> None:
        self.aws_request_id = f"turn-{number}"
        self.started = clock.now()

    def get_remaining_time_in_millis(self) -> int:
        return int(TIMEOUT_MS - (clock.now() - self.started).total_seconds() * 1000)


def measured(kind: str, take: Any, clock_file: Path, done: Any) -> dict[str, Any]:
    """Turns of one pass from its first message until none is queued: how many, how long, how long spent waiting, and
    whether the pass was whole when the turns stopped."""
    start, waited, turns, busy = clock.now(), 0.0, 0, 0
    message: dict[str, Any] | None = {"v": 1, "kind": kind, "start": True}
    while message is not None and turns < 1_000:
        turns += 1
        before = len(pages)
        take(message, Turn(turns))
        busy += len(pages) == before  # it read no page: it found the pass held by the turn before
        if not sent:
            break
        # The next turn comes when its message's delay is over (the handler's DelaySeconds).
        message, delay = sent.pop(0)
        waited += delay
        clock.advance(clock_file, delay)
    return {
        "turns": turns,
        "minutes": round((clock.now() - start).total_seconds() / 60, 1),
        "waited_min": round(waited / 60, 1),
        "turns_that_found_it_busy": busy,
        "whole": done(),
    }


# The messages the handler queued (body, delay), as it sent them: the bench takes each as the next turn itself.
sent: list[tuple[dict[str, Any], int]] = []
# The pages read, one a Scan, each moving the clock by PAGE_S.
pages: list[float] = []


def main() -> None:
    clock_file = movable_clock()
    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(client, "bench", "bench-entries")
        queue = boto3.client("sqs").create_queue(QueueName="bench-migrations")["QueueUrl"]
        os.environ[wiring.queue("migrations").url_env] = queue
        # Items no migration writes for (each page reads them and writes nothing): only the pages' count matters.
        for start in range(0, ITEMS, 25):
            puts = [{"PutRequest": {"Item": a.key(f"BENCH#{n}", "X")}} for n in range(start, start + 25)]
            client.batch_write_item(RequestItems={"bench": puts})
        # Every client the handler makes comes from the one session (interlude.sdk_clients): each page's Scan is seen.
        events = sdk_clients.session().get_component("event_emitter")
        events.register("before-call.dynamodb.Scan", lambda **_: pages.append(clock.advance(clock_file, PAGE_S)))
        events.register(
            "provide-client-params.sqs.SendMessage",
            lambda params, **_: sent.append((json.loads(params["MessageBody"]), params.get("DelaySeconds", 0))),
        )

        from interlude import migrations
        from interlude.local import lambda_runtime
        from interlude.migrations.sweeps import RECORDS_SWEEP_ID, RETENTION_SWEEP_ID
        from interlude.store.migrations import DONE, MigrationStore

        handler = lambda_runtime.handler_module("migrate")

        def states() -> dict[str, str]:
            found = MigrationStore("bench", client, "bench-entries").checkpoints()
            return {mid: str(checkpoint.get("state")) for mid, checkpoint in found.items()}

        sweep = measured(
            "retention-sweep",
            handler.take_sweep_turn,
            clock_file,
            lambda: states().get(RETENTION_SWEEP_ID) == states().get(RECORDS_SWEEP_ID) == DONE,
        )
        # Every migration of the release scans the table: one pass each, one after another.
        names = migrations.module_names()
        passes = measured(
            "migrations-turn",
            lambda _, context: handler.take_turn(context),
            clock_file,
            lambda: all(states().get(name.split("_")[0]) == DONE for name in names),
        )
    per_turn = -(-(TIMEOUT_MS - handler.MARGIN_MS) // int(PAGE_S * 1000))
    print(f"a pass over {ITEMS} items: {-(-ITEMS // migrations.PAGE_ITEMS)} pages of {PAGE_S:.0f} s, {per_turn} a turn")
    for label, found in (
        ("retention sweep (both tables)", sweep),
        (f"migrations ({len(migrations.module_names())}, a pass each)", passes),
    ):
        print(
            f"{label}: {found['turns']} turns, {found['minutes']} min from the first to the last, {found['waited_min']} min"
            f" of it waiting, {found['turns_that_found_it_busy']} turns that found it held; whole: {found['whole']}"
        )


if __name__ == "__main__":
    main()
