"""`interlude migrate`: run the table's pending migrations here (interlude.migrations), or show where each stands.

A deploy runs them by itself (the `migrate` function, turn by turn); this is for the local stack (`--local`), a table
named directly, or a deployment whose migrations an operator wants to run or watch (`--stack`). It shares the
checkpoints with the function: whichever runner holds a migration, the other waits for it.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from interlude.cli.client import table
from interlude.cli.local import add_table_args, table_store


def add_commands(sub: argparse._SubParsersAction) -> None:
    migrate = sub.add_parser("migrate", help="run the table's pending migrations (a deploy runs them by itself)")
    migrate.add_argument("--status", action="store_true", help="show where each migration stands; run none")
    add_table_args(migrate)
    migrate.set_defaults(func=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    from interlude import migrations

    store = table_store(args)
    if args.status:
        print(_status(migrations.status(store)))
        return 0

    def report(progress: migrations.Progress) -> None:
        done = "finished" if progress.finished else "goes on"
        print(f"{progress.migration.title}: read {progress.scanned} items, wrote {progress.written}; {done}", flush=True)

    outcome = migrations.run_pending(store, f"cli:{socket.gethostname()}:{os.getpid()}", report=report)
    if outcome.busy is not None:
        held = next(m.title for m in migrations.registered() if m.id == outcome.busy)
        print(f"interlude: migration {held} is being run elsewhere (the deploy's turn); it goes on by itself", file=sys.stderr)
        return 1
    print("every migration is done" if not outcome.finished else f"done: {len(outcome.finished)} migration(s) run")
    return 0


def _status(rows: list[dict[str, object]]) -> str:
    headers = ("MIGRATION", "STATE", "ITEMS READ", "ITEMS WRITTEN", "STARTED", "FINISHED", "BY RELEASE")
    cells = [
        (
            row["migration"],
            row["state"],
            row.get("scanned"),
            row.get("written"),
            row.get("startedAt"),
            row.get("finishedAt"),
            row.get("release"),
        )
        for row in rows
    ]
    return table(headers, cells, "no migrations")
