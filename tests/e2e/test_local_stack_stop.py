"""`interlude dev` stops, cleanly, when SIGTERM reaches its whole process group (`timeout`, a shell job killed, a
container stopping): its function instances and multiprocessing's fork server get the signal too and die with an
invocation in flight, which must not leave the stop waiting for ever (interlude.local.lambda_runtime.InstancePool)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import requests

from tests.support.local_stack import Api, LocalStackProcess, until, wire

# Two api instances (one holds the poll, one waits for work: killed while waiting, it left a multiprocessing.Pool's
# stop waiting for ever) and one batch at a time per queue: few processes to start (the stack's start is the test's time).
FEW_PROCESSES = {"INTERLUDE_LOCAL_INSTANCES": "2", "INTERLUDE_LOCAL_QUEUE_CONCURRENCY": "1"}


def group_gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_sigterm_to_the_stacks_process_group_stops_it_with_an_invocation_in_flight_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    stack = LocalStackProcess(tmp_path, FEW_PROCESSES, own_group=True)
    try:
        api = Api.of(stack.wait())
        created = api.call("POST", "/runs", {"workflowId": "demo-approval"})
        assert created.status_code == 201, created.text
        run = wire(created.json()["runId"])
        # Given a long poll held by the api instance (the run waits at its gate: no event comes)
        latest = api.call("GET", f"/runs/{run}/events/poll?timeout=1").json()["events"][-1]["sequence"]
        answered: list[int] = []

        def long_poll() -> None:
            path = f"/runs/{run}/events/poll?afterSequence={latest}&timeout=30"
            try:
                answered.append(api.call("GET", path).status_code)
            except requests.RequestException:
                answered.append(0)

        polling = threading.Thread(target=long_poll, daemon=True)
        polling.start()
        time.sleep(0.5)  # for the poll to reach the instance (were it not there yet, the stop is the same stop)
        assert answered == []
        # When the whole group gets SIGTERM
        os.killpg(stack.proc.pid, signal.SIGTERM)
        # Then the stack stops as after Ctrl-C, well before the poll would have ended, and exits 0
        assert stack.proc.wait(timeout=15) == 0
        assert Path(stack.log.name).read_text().rstrip().endswith("stopped.")
        # and leaves no process of its group behind (its instances and fork server reaped)
        assert until(lambda: group_gone(stack.proc.pid), 10)
        polling.join(timeout=10)
        [status] = answered
        assert status != 200
    finally:
        if stack.proc.poll() is None or not group_gone(stack.proc.pid):
            with_group_killed(stack.proc)
        stack.log.close()


def with_group_killed(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
