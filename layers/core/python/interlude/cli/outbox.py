"""`interlude outbox --local`: the mail the local stack sent (issue 14), newest last."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from interlude.cli.client import Client
from interlude.cli.local import add_state_file_arg, local_state


def _outbox(args: argparse.Namespace) -> int:
    if not args.local:
        sys.exit("interlude: outbox lists the local stack's mail only (--local); a deployment sends through SES")
    from interlude.local.mailbox import OUTBOX_PATH

    state = local_state(args)
    messages = Client(state["baseUrl"], state.get("apiKey", "")).call("GET", OUTBOX_PATH)["messages"]
    for message in messages:
        line = {k: message[k] for k in ("id", "to", "subject")}
        line["page"] = f"{state['baseUrl']}{OUTBOX_PATH}/{message['id']}"
        print(json.dumps(line))
    return 0


def add_commands(sub: Any) -> None:
    outbox = sub.add_parser("outbox", help="the mail the local stack sent (moto's SES), one JSON line each")
    outbox.add_argument("--local", action="store_true", help="the running local stack (the only one it reads)")
    add_state_file_arg(outbox)
    outbox.set_defaults(func=_outbox, in_process=False)
