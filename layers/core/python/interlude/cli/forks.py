"""`interlude runs fork RUN [--mode replay|branch] [--from-seq N]` and `interlude runs redrive RUN` (issue 29, item 2):
clients of POST /runs/{runId}:fork and :redrive. In words by default (which run came from which, from where, where it
stands; `--wait` follows it to a gate or its end); `--json` prints the API's answers."""

from __future__ import annotations

import argparse
from typing import Any

from interlude.cli.client import Client, add_endpoint_args, printed, run_call
from interlude.cli.lifecycle import DEFAULT_WAIT_S, follow, state_in_words, status_in_words


def _runs_fork(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"mode": args.mode}
    if args.from_seq is not None:
        body["fromSeq"] = args.from_seq
    client = Client.of(args)
    forked = run_call(client, "POST", args.run, ":fork", body)
    if forked["mode"] == "replay":
        how = "a replay: every decision and call it made stands"
    else:
        how = f"a branch at event {forked['fromSeq']}: what was decided before it stands, the rest runs anew"
    return _answered(args, client, forked, f"run {forked['runId']} forked from {forked['sourceRunId']}, {how}")


def _runs_redrive(args: argparse.Namespace) -> int:
    client = Client.of(args)
    forked = run_call(client, "POST", args.run, ":redrive")
    said = f"run {forked['runId']} redrives {forked['sourceRunId']} from its failed step; what was decided before it stands"
    return _answered(args, client, forked, said)


def _answered(args: argparse.Namespace, client: Client, forked: dict[str, Any], said: str) -> int:
    if not args.wait:
        status = status_in_words(forked["status"])
        return printed(args, forked, f"{said}\nit is {status} (`--wait` follows it)")
    if not args.json:
        print(said, flush=True)
    run, events = follow(client, forked["runId"], args.timeout)
    printed(args, {"fork": forked, "run": run, "events": events}, state_in_words(client, run, events))
    return 1 if run["status"] in ("failed", "cancelled") else 0


def _with_wait(parser: argparse.ArgumentParser) -> None:
    add_endpoint_args(parser)
    parser.add_argument("run", metavar="RUN", help="the run id (tenant/opaque)")
    parser.add_argument("--wait", action="store_true", help="follow the new run until it waits at a gate or ends")
    parser.add_argument("--timeout", type=float, default=DEFAULT_WAIT_S, help=f"with --wait: seconds (default {DEFAULT_WAIT_S})")


def add_fork_commands(runs: Any) -> None:
    fork = runs.add_parser("fork", help="a new run that carries this run's decisions and calls (POST /runs/{runId}:fork)")
    _with_wait(fork)
    fork.add_argument(
        "--mode", choices=("replay", "branch"), default="replay",
        help="replay: carry everything (default); branch: only what came before --from-seq",
    )
    fork.add_argument("--from-seq", type=int, metavar="N", help="with --mode branch: the event the branch starts at")
    fork.set_defaults(func=_runs_fork, in_process=False)
    redrive = runs.add_parser("redrive", help="a failed run again from its failed step, as a new run (POST /runs/{runId}:redrive)")
    _with_wait(redrive)
    redrive.set_defaults(func=_runs_redrive, in_process=False)
