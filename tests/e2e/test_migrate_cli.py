"""Issue 30 item 2 on the local stack: it runs the table's migrations as it starts, as each deploy does (the migrate
function's trigger, then its queue), and `interlude migrate --local` shows each one done and runs none again."""

from __future__ import annotations

from interlude import migrations
from tests.support.local_stack import cli, until


def test_the_local_stack_migrates_its_table_as_a_deploy_does(stack_info) -> None:
    def all_done() -> str | None:
        shown = cli(stack_info, "migrate", "--local", "--status").stdout
        return shown if shown.count(" done ") == len(migrations.registered()) else None

    # The queue's pump takes the turn the start queued: each migration is done, by this release.
    shown = until(all_done, 30)
    lines = shown.splitlines()
    assert lines[0].split() == ["MIGRATION", "STATE", "ITEMS", "READ", "ITEMS", "WRITTEN", "STARTED", "FINISHED", "BY", "RELEASE"]
    assert [line.split()[0] for line in lines[1:]] == [m.id for m in migrations.registered()]
    run = cli(stack_info, "migrate", "--local")
    assert run.stdout.strip() == "every migration is done"
