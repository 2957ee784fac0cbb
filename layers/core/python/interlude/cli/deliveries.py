"""`interlude deliveries dead|retry|recover` (issue 30 item 5): a subscription's dead letters, and what failed sent
again over the HTTP API (a webhook delivery, a run's callback notice or notification, or all of a scope's at once),
and `interlude runs retry-action`: a run failed at its core.http action, run again from there."""

from __future__ import annotations

import argparse
from typing import Any

from interlude.cli.client import Client, CliError, add_endpoint_args, printed, segment, table, wire

DEAD_COLUMNS = ("DEAD SINCE", "DELIVERY", "RUN", "EVENT", "ATTEMPTS", "WHY")
REASONS = {"retries_exhausted": "every attempt failed", "payload_unprojectable": "its event could not be sent"}


def _dead(args: argparse.Namespace) -> int:
    client = Client.of(args)
    page = client.call("GET", f"/webhooks/{wire(args.webhook)}/dead-letters")
    rows = [
        (
            d["deadLetteredAt"],
            d["deliveryId"],
            d["runId"],
            d["eventType"],
            d["attempts"],
            REASONS.get(d["reason"], d["reason"]) + (f" (last answer {d['lastStatus']})" if d.get("lastStatus") else ""),
        )
        for d in page["deliveries"]
    ]
    return printed(args, page, table(DEAD_COLUMNS, rows, "(no dead letters)"))


def _retry(args: argparse.Namespace) -> int:
    if (args.webhook is None) == (args.run is None):
        raise CliError("name where the delivery was dead-lettered: --webhook WEBHOOK or --run RUN")
    client = Client.of(args)
    if args.webhook is not None:
        path = f"/webhooks/{wire(args.webhook)}/dead-letters/{wire(args.delivery)}/retry"
    else:
        family = "notifications" if args.notification else "deliveries"
        path = f"/runs/{wire(args.run)}/{family}/{wire(args.delivery)}/retry"
    answer = client.call("POST", path)
    what = "notification" if args.notification else "delivery"
    human = f"{what} {args.delivery} queued again: attempt {answer['attempt']}, replay {answer['replay']}"
    return printed(args, answer, human)


def _recover(args: argparse.Namespace) -> int:
    client = Client.of(args)
    if args.webhook is not None:
        body: dict[str, Any] = {"since": args.since, **({"until": args.until} if args.until else {})}
        answer = client.call("POST", f"/webhooks/{wire(args.webhook)}/dead-letters:recover", body)
    elif args.run is not None:
        family = "notifications" if args.notifications else "deliveries"
        answer = client.call("POST", f"/runs/{wire(args.run)}/{family}:recover")
    else:
        raise CliError("name what to recover: --webhook WEBHOOK --since TIME, or --run RUN")
    human = (
        f"{answer['queued']} of {answer['matched']} dead letters queued again"
        + (f", {answer['skipped']} left (settled meanwhile, or no longer rebuildable)" if answer["skipped"] else "")
        + ("" if answer["status"] == "completed" else " (not finished: run the same command again in a minute)")
    )
    return printed(args, answer, human)


def _retry_action(args: argparse.Namespace) -> int:
    answer = Client.of(args).call("POST", f"/runs/{wire(args.run)}/actions/{segment(args.node)}/retry")
    return printed(args, answer, f"run {args.run} goes on from {args.node}: its call's attempt {answer['attempt']}")


def add_commands(sub: Any) -> None:
    deliveries = sub.add_parser("deliveries", help="dead letters, and sending them again").add_subparsers(
        dest="deliveries_command", required=True
    )
    dead = deliveries.add_parser("dead", help="a webhook subscription's dead letters, newest first")
    add_endpoint_args(dead)
    dead.add_argument("--webhook", required=True, help="the subscription's id")
    dead.set_defaults(func=_dead, in_process=False)

    retry = deliveries.add_parser("retry", help="send one dead letter again (the same delivery id)")
    add_endpoint_args(retry)
    retry.add_argument("delivery", metavar="DELIVERY", help="the delivery's (or notification's) id")
    retry.add_argument("--webhook", help="the subscription it was dead-lettered by")
    retry.add_argument("--run", help="the run whose callback notice (or notification) it is")
    retry.add_argument("--notification", action="store_true", help="DELIVERY is a notification of --run")
    retry.set_defaults(func=_retry, in_process=False)

    recover = deliveries.add_parser("recover", help="send every dead letter of a subscription or a run again, once")
    add_endpoint_args(recover)
    recover.add_argument("--webhook", help="the subscription (with --since)")
    recover.add_argument("--since", help="dead-lettered at or after this time (ISO 8601, with its zone)")
    recover.add_argument("--until", help="and at or before this time (default: now)")
    recover.add_argument("--run", help="a run's dead callback notices (or, with --notifications, notifications)")
    recover.add_argument("--notifications", action="store_true")
    recover.set_defaults(func=_recover, in_process=False)


def add_run_commands(runs: Any) -> None:
    retry_action = runs.add_parser("retry-action", help="a run failed at its HTTP action: run it again from there")
    add_endpoint_args(retry_action)
    retry_action.add_argument("run", metavar="RUN")
    retry_action.add_argument("node", metavar="NODE", help="the action's node id")
    retry_action.set_defaults(func=_retry_action, in_process=False)
