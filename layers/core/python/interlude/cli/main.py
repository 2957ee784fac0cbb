"""`interlude`: run the local stack, and administer a deployment (keys) from the command line."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import urllib.error
from pathlib import Path

from interlude import __version__, wiring
from interlude.cli.client import count_between
from interlude.cli.local import STATE_FILE, add_state_file_arg, add_table_args, local_state, table_store
from interlude.cli.operate import add_key_endpoint_args
from interlude.config.local import cli_settings

# A command whose parser sets `in_process=False` is a client of the HTTP API (or of files) only: it runs no service
# here, so `main` does not compose the application for it (the engine, the store and boto3 stay unimported).
IN_PROCESS = "in_process"


def compose() -> None:
    from interlude.composition import compose as join

    join()


def _dev(args: argparse.Namespace) -> int:
    from interlude.local.stack import LocalStack, write_state_file

    stack = LocalStack(
        port=args.port,
        moto_port=args.moto_port,
        verbose=args.verbose,
        clock_file=Path(args.state_file).parent / "clock",
    )
    info = stack.start()
    write_state_file(info, Path(args.state_file))
    print(f"Interlude is running at {info.base_url}  (tenant {info.tenant!r}; data lives in this process only)")
    print(f"  admin key: {info.api_key}")
    print(f"  console:   {info.base_url}/console  (sign in with the admin key)")
    print(f"  live:      {info.live_url}  (follow runs over a WebSocket: docs/api.md)")
    print(f"  state:     {args.state_file}  (baseUrl, tenant, apiKey)")
    print("  try:")
    print(
        f"    curl -s -X POST {info.base_url}/runs -H 'Authorization: Bearer {info.api_key}' "
        "-H 'Content-Type: application/json' -d '{\"workflowId\": \"demo-approval\"}'"
    )
    print("  Ctrl-C stops it.", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        while not stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    stack.stop()
    print("stopped.")
    return 0


def _keys_create(args: argparse.Namespace) -> int:
    if args.tenant is None:
        from interlude.cli.operate import keys_create_http

        return keys_create_http(args)
    compose()
    from interlude.composition import Services
    from interlude.domain.clock import iso, now
    from interlude.domain.models.requests import CreateKeyRequest
    from interlude.store.tenants import DELETED, DELETING, TenantRecords

    request = CreateKeyRequest(
        subjectId=args.subject,
        scopes=args.scopes,
        groups=[g for g in (args.groups or "").split(",") if g],
        roles=[r for r in (args.roles or "").split(",") if r],
        kind=args.kind,
        expiresAt=args.expires_at,
    )
    store = table_store(args)
    records = TenantRecords(store)
    if records.status(args.tenant, consistent=True) in (DELETING, DELETED):
        sys.exit(f"interlude: tenant {args.tenant!r} is being deleted or was deleted (`interlude tenants create` makes it anew)")
    created = Services(store).keys.issue_key(args.tenant, request)
    # A tenant first made this way (before `interlude tenants create`) is listed in the registry too.
    records.register(args.tenant, iso(now()))
    print(json.dumps(created, indent=2))
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    if args.tenant is None:
        from interlude.cli.operate import keys_list_http

        return keys_list_http(args)
    compose()
    from interlude.composition import Services

    listed = Services(table_store(args)).keys.list_keys(args.tenant, args.limit, args.cursor)
    print(json.dumps(listed, indent=2))
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    if args.tenant is None:
        from interlude.cli.operate import keys_revoke_http

        return keys_revoke_http(args)
    compose()
    from interlude.composition import Services
    from interlude.domain.errors import DomainError

    try:
        revoked = Services(table_store(args)).keys.revoke_key(args.tenant, args.key_id)
    except DomainError as exc:
        sys.exit(f"interlude: {exc.message}")
    print(json.dumps(revoked, indent=2))
    return 0


def _clock_advance(args: argparse.Namespace) -> int:
    from interlude.domain import clock

    state = local_state(args)
    if not state.get("clockFile"):
        sys.exit("interlude: this local stack has no clock file")
    try:
        offset = clock.advance(state["clockFile"], args.seconds)
    except ValueError as refused:  # a move backward
        sys.exit(f"interlude: cannot move the clock by {args.seconds:g} s: {refused}")
    print(json.dumps({"clockFile": state["clockFile"], "offsetSeconds": offset}))
    return 0


def scope_list(text: str) -> list[str]:
    """`--scopes`: comma-separated scope names, or `all` spelled out (never a default: a key gets what is named)."""
    return list(wiring.ALL_SCOPES) if text.strip() == "all" else [s.strip() for s in text.split(",") if s.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interlude", description="Human-in-the-loop gates for workflow runs.")
    parser.add_argument("--version", action="version", version=f"interlude {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="run the whole service locally (moto in-process)")
    dev.add_argument("--port", type=int, default=cli_settings().port)
    dev.add_argument("--moto-port", type=int, default=0)
    dev.add_argument("--state-file", default=str(STATE_FILE))
    dev.add_argument("--verbose", action="store_true")
    dev.set_defaults(func=_dev)

    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="keys_command", required=True)
    # Without --tenant: over the HTTP API with a keys:admin key (--url/--key, the environment or the local stack);
    # with --tenant: straight on the table (the first admin key of a tenant is made this way).
    create = keys.add_parser("create", help="create an API key (printed once)")
    create.add_argument("--tenant", help="act on the table for this tenant (else: over HTTP, the key's tenant)")
    create.add_argument("--subject", required=True, help="subjectId of the key's holder")
    create.add_argument(
        "--scopes",
        required=True,
        type=scope_list,
        help=f"comma-separated, from: {', '.join(wiring.ALL_SCOPES)}; or `all` (keys:admin included)",
    )
    create.add_argument("--groups", default="")
    create.add_argument("--roles", default="")
    create.add_argument("--kind", default="user", choices=["user", "agent", "workload"])
    create.add_argument("--expires-at", help="ISO 8601 instant with a time zone after which the key is refused")
    add_table_args(create)
    add_key_endpoint_args(create)
    create.set_defaults(func=_keys_create, in_process=False)  # composes itself with --tenant

    listing = keys.add_parser("list", help="the tenant's keys, oldest first (metadata; never secrets)")
    listing.add_argument("--tenant", help="act on the table for this tenant (else: over HTTP, the key's tenant)")
    listing.add_argument("--limit", type=count_between(1, 100), default=100, metavar="1..100")
    listing.add_argument("--cursor", help="the cursor a previous page printed")
    add_table_args(listing)
    add_key_endpoint_args(listing)
    listing.set_defaults(func=_keys_list, in_process=False)

    revoke = keys.add_parser("revoke", help="revoke a key of the tenant (refused everywhere within 5 s)")
    revoke.add_argument("--tenant", help="act on the table for this tenant (else: over HTTP, the key's tenant)")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the keyId (the 16 hex digits after il_)")
    add_table_args(revoke)
    add_key_endpoint_args(revoke)
    revoke.set_defaults(func=_keys_revoke, in_process=False)

    clock_cmd = sub.add_parser("clock", help="the local stack's clock (tests and demos)")
    clock_sub = clock_cmd.add_subparsers(dest="clock_command", required=True)
    advance = clock_sub.add_parser("advance", help="move the running local stack's clock forward")
    advance.add_argument("seconds", type=float)
    add_state_file_arg(advance)
    advance.set_defaults(func=_clock_advance, in_process=False)

    from interlude.cli.inbox import add_commands

    add_commands(sub)  # inbox, tenant settings, credentials grant (issue 3)
    from interlude.cli.tokens import add_commands as add_token_commands

    add_token_commands(sub)  # tokens rotate / retire (issue 4)
    from interlude.cli.webhooks import add_commands as add_webhook_commands

    add_webhook_commands(sub)  # webhooks secret show / rotate (issue 6)
    from interlude.cli.audit import add_commands as add_audit_commands

    add_audit_commands(sub)  # audit verify / list (issue 16)
    from interlude.cli.outbox import add_commands as add_outbox_commands

    add_outbox_commands(sub)  # outbox --local (issue 14)
    from interlude.cli.operate import add_commands as add_operator_commands

    add_operator_commands(sub)  # runs, resolve, workflows (issue 16)
    from interlude.cli.preflight import add_commands as add_preflight_commands

    add_preflight_commands(sub)  # preflight (issue 25)
    from interlude.cli.migrate import add_commands as add_migrate_commands

    add_migrate_commands(sub)  # migrate (issue 30)
    from interlude.cli.deliveries import add_commands as add_delivery_commands

    add_delivery_commands(sub)  # deliveries dead / retry / recover (issue 30 item 5)

    from interlude.cli.tenants import add_commands as add_tenant_commands

    add_tenant_commands(sub)  # tenants (issue 30, item 6)
    return parser


def main(argv: list[str] | None = None) -> int:
    from interlude.cli.client import CliError
    from interlude.cli.deployment import DeploymentError, aws_error_line
    from interlude.domain.errors import DomainError

    args = build_parser().parse_args(argv)
    if getattr(args, IN_PROCESS, True):
        compose()
    try:
        return int(args.func(args))
    except (DeploymentError, CliError) as error:
        print(f"interlude: {error}", file=sys.stderr)
    except DomainError as error:
        print(f"interlude: {error.code}: {error.message}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interlude: interrupted", file=sys.stderr)
    except BrokenPipeError:
        # The reader of the output went away (`| head`): nothing more reaches it, and Python's own flush at exit
        # would fail again, so the rest of the output goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("interlude: the output was closed before all of it was written", file=sys.stderr)
    except (urllib.error.URLError, ConnectionError) as error:  # a client call that does not say where it went
        reason = getattr(error, "reason", error)
        print(f"interlude: cannot reach the API (is the local stack running? `make dev`): {reason}", file=sys.stderr)
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (INTERLUDE_DEBUG=1 shows it)
        if cli_settings().debug:
            raise
        from botocore.exceptions import EndpointConnectionError

        line = aws_error_line(error) or f"unexpected {type(error).__name__}: {error}"
        if getattr(args, "local", False) and isinstance(error, EndpointConnectionError):
            line = f"the local stack of {args.state_file} is not running ({error}): start it with `make dev`"
        print(f"interlude: {' '.join(line.split())}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
