"""What every CLI command that can work on the running local stack (`interlude dev`) or a deployment shares.

`interlude dev` writes its state file (baseUrl, tenant, apiKey, motoEndpoint, ...); `--local` on another
command reads it to reach that stack's in-process AWS instead of a deployment's. Only `--local` imports the local
stack (and so moto): against a deployment the CLI needs boto3 alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlude.store.facade import Store

# Where `interlude dev` writes its state file, relative to the directory it runs in (`make dev`: the checkout's root).
STATE_FILE = Path(".interlude/local.json")


def found_state_file() -> Path:
    """The state file in this directory or the nearest one above it that has one, so a command run anywhere inside
    the checkout finds the stack `make dev` started at its root; else where `interlude dev` would write it here."""
    here = Path.cwd()
    for directory in (here, *here.parents):
        if (directory / STATE_FILE).is_file():
            return directory / STATE_FILE
    return STATE_FILE


def add_state_file_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-file", default=str(found_state_file()), help=f"the local stack's state file (default: the nearest {STATE_FILE})"
    )


def local_state(args: argparse.Namespace) -> dict[str, Any]:
    """What the running local stack's state file says (baseUrl, apiKey, motoEndpoint, clockFile, ...)."""
    try:
        state = json.loads(Path(args.state_file).read_text())
    except FileNotFoundError:
        sys.exit(f"interlude: no local stack: {args.state_file} does not exist (start one with `make dev`)")
    except (OSError, ValueError) as exc:
        sys.exit(f"interlude: {args.state_file} is not a local stack's state file ({exc})")
    if not isinstance(state, dict):
        sys.exit(f"interlude: {args.state_file} is not a local stack's state file")
    return state


def add_local_args(parser: argparse.ArgumentParser) -> None:
    from interlude.cli.deployment import add_stack_arg

    add_stack_arg(parser)
    parser.add_argument("--local", action="store_true", help="use the running local stack")
    add_state_file_arg(parser)


def add_table_args(parser: argparse.ArgumentParser) -> None:
    """--table and --entries-table (a deployment's two tables, wiring.TABLES), --stack and --local."""
    parser.add_argument("--table", help="DynamoDB table (default: $TABLE_NAME, else --stack's)")
    parser.add_argument(
        "--entries-table", help="the deployment's second DynamoDB table (default: $ENTRIES_TABLE_NAME, else --stack's)"
    )
    add_local_args(parser)


def use_local_stack(args: argparse.Namespace) -> bool:
    """With --local, point the AWS clients made from now on at the local stack; whether it did."""
    if not args.local:
        return False
    from interlude.local.environment import ENTRIES_TABLE_NAME, TABLE_NAME, configure_environment

    configure_environment(local_state(args)["motoEndpoint"], TABLE_NAME, ENTRIES_TABLE_NAME)
    return True


def table_store(args: argparse.Namespace) -> Store:
    """The Store of the local stack (--local), else of --table and --entries-table (or $TABLE_NAME and
    $ENTRIES_TABLE_NAME), else of --stack's tables. Both tables are named, or the command stops: the second is never
    taken to be the first."""
    from interlude import wiring
    from interlude.cli.deployment import stack_output
    from interlude.config.local import cli_settings
    from interlude.store.facade import Store

    if use_local_stack(args):
        from interlude.local.environment import ENTRIES_TABLE_NAME, TABLE_NAME

        return Store(TABLE_NAME, ENTRIES_TABLE_NAME)
    settings = cli_settings()
    table = args.table or settings.table_name or stack_output(args, wiring.OUTPUT_TABLE_NAME)
    if not table:
        sys.exit("interlude: name the deployment with --stack (or the table with --table / TABLE_NAME, or --local)")
    entries = args.entries_table or settings.entries_table_name or stack_output(args, wiring.OUTPUT_ENTRIES_TABLE_NAME)
    if not entries:
        sys.exit(
            "interlude: name the deployment's second table too: --stack, or --entries-table / ENTRIES_TABLE_NAME "
            "(its stack output EntriesTableName)"
        )
    return Store(table, entries)
