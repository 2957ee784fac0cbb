"""`interlude tokens rotate` / `interlude tokens retire KID`: edit the interrupt token key ring.

`--local` edits the running local stack's ring (found through its state file); `--stack NAME` (the stack's
KeyRingSecret output) or `--secret NAME` (or $KEY_RING_SECRET) edits a deployed one with the caller's AWS
credentials. Only kids are printed, never a secret.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from interlude import wiring
from interlude.cli.deployment import stack_output
from interlude.cli.local import add_local_args, use_local_stack
from interlude.config.local import cli_settings


def _secret(args: argparse.Namespace) -> str:
    if use_local_stack(args):
        from interlude.local.keyring import LOCAL_KEY_RING_SECRET

        return LOCAL_KEY_RING_SECRET
    name = (
        args.secret
        or cli_settings().key_ring_secret
        or stack_output(args, wiring.OUTPUT_KEY_RING_SECRET)
    )
    if not name:
        sys.exit(
            f"interlude: name the deployment with --stack (or the key ring with --secret / "
            f"${wiring.KEY_RING_SECRET.env}, or --local)"
        )
    return name


def _show(ring: Any) -> int:
    print(json.dumps({"currentKid": ring.current_kid, "kids": sorted(ring.keys)}, indent=2))
    return 0


def _rotate(args: argparse.Namespace) -> int:
    from interlude.adapters.keyring_store import rotate_key_ring

    return _show(rotate_key_ring(_secret(args)))


def _retire(args: argparse.Namespace) -> int:
    from interlude.adapters.keyring_store import retire_key

    try:
        ring = retire_key(_secret(args), args.kid)
    except ValueError as exc:
        sys.exit(f"interlude: {exc}")
    return _show(ring)


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--secret", help=f"Secrets Manager secret id or ARN (default: ${wiring.KEY_RING_SECRET.env})")
    add_local_args(parser)


def add_commands(sub: Any) -> None:
    tokens = sub.add_parser("tokens", help="the interrupt token key ring").add_subparsers(
        dest="tokens_command", required=True
    )
    rotate = tokens.add_parser("rotate", help="add a new signing kid; older kids keep verifying")
    _add_target(rotate)
    rotate.set_defaults(func=_rotate)
    retire = tokens.add_parser("retire", help="remove a kid: every token signed under it stops working")
    retire.add_argument("kid")
    _add_target(retire)
    retire.set_defaults(func=_retire)
