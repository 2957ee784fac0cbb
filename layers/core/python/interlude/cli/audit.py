"""`interlude audit verify` and `interlude audit list`: the tenant's audit log over the API (GET /audit/verify,
GET /audit), against the local stack or a deployment (--url/--key or INTERLUDE_URL / INTERLUDE_API_KEY)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from interlude.cli.client import Client, DisplayNames, Refused, add_endpoint_args
from interlude.domain.audit import MAX_SEQ
from interlude.domain.audit_words import SURFACES, audit_action_words
from interlude.faces.modulex.references import modulex_id

# `verify` exits with this when the log has anomalies (an error reaching the API exits 1).
BROKEN_EXIT = 2


def walks(client: Client, first: int, last: int, chain: int | None) -> list[dict[str, Any]]:
    """GET /audit/verify over [first, last] (every chain, or `chain`) in as many walks as the API's limit needs: a
    refused range names the toSeq it can reach (details.maxToSeq), verified before going on from the next one."""
    answers: list[dict[str, Any]] = []
    while True:
        query = {"fromSeq": str(first), "toSeq": str(last)} | ({"chain": str(chain)} if chain is not None else {})
        try:
            return [*answers, client.call("GET", "/audit/verify", query=query)]
        except Refused as refused:
            reach = (refused.envelope.get("details") or {}).get("maxToSeq") if refused.status == 400 else None
            if not isinstance(reach, int) or reach < first:
                raise
        answers.append(client.call("GET", "/audit/verify", query={**query, "toSeq": str(reach)}))
        first = reach + 1


def describe(anomaly: dict[str, Any]) -> str:
    kind = anomaly.get("kind", "chain-break")
    line = f"  entry {anomaly['atSeq']}: {kind}"
    if kind == "chain-break":
        line += f" (prevHash {str(anomaly.get('actualPrevHash'))[:12]}…, expected {str(anomaly.get('expectedPrevHash'))[:12]}…)"
    if anomaly.get("checkpoint"):
        line += f" (checkpoint {anomaly['checkpoint']})"
    if anomaly.get("detail"):
        line += f": {anomaly['detail']}"
    return line


def _verify(args: argparse.Namespace) -> int:
    """Every chain of the tenant (or --chain alone) from --from to --to (default: each chain's end). The walk asks
    for every chain the API knows, the ones the published anchor names included, not only those /audit lists."""
    client = Client.of(args)
    chains = {int(k): seq for k, seq in client.call("GET", "/audit", query={"limit": "1"})["chains"].items()}
    if args.chain is not None:
        chains = {args.chain: chains.get(args.chain, 0)}
    spans = {k: (args.from_seq, min(last, args.to_seq) if args.to_seq is not None else last) for k, last in chains.items()}
    spans = {k: span for k, span in spans.items() if span[1] >= max(span[0], 1)}
    answers = walks(client, args.from_seq, MAX_SEQ if args.to_seq is None else args.to_seq, args.chain)
    checkpoints = [c for answer in answers for c in answer["checkpoints"]]
    anomalies = [a for answer in answers for a in answer["anomalies"]]
    if args.json:
        print(json.dumps({"chainValid": not anomalies, "chains": spans, "checkpoints": checkpoints, "anomalies": anomalies}, indent=2))
        return 0 if not anomalies else BROKEN_EXIT
    if not spans and not anomalies:
        print("audit log empty: nothing recorded yet" if not any(chains.values()) else "audit log: no entries in that range")
        return 0
    total = sum(last - max(first, 1) + 1 for first, last in spans.values())
    span = f"{total} entr{'y' if total == 1 else 'ies'} in {len(spans)} chain{'' if len(spans) == 1 else 's'}"
    signed = f", {len(checkpoints)} signed checkpoint(s)" if checkpoints else ""
    if not anomalies:
        print(f"audit log valid: {span}{signed}, no anomalies")
        return 0
    print(f"audit log BROKEN: {span}{signed}, {len(anomalies)} anomal{'y' if len(anomalies) == 1 else 'ies'}")
    for anomaly in anomalies:
        print(describe(anomaly))
    return BROKEN_EXIT


# What an entry was about, as `audit list` names each of its target's ids.
TARGET_WORDS = {"runId": "run", "nodeId": "step", "keyId": "key", "provider": "account", "tenant": "tenant", "webhookId": "webhook"}


def _list(args: argparse.Namespace) -> int:
    client = Client.of(args)
    page = client.call("GET", "/audit", query={"limit": args.limit, "cursor": args.cursor or None})
    if args.json:
        print(json.dumps(page, indent=2))
        return 0
    names = DisplayNames(client)
    for entry in page["entries"]:
        target = ", ".join(
            f"{TARGET_WORDS.get(k, k)} {modulex_id(str(v)) if k == 'nodeId' else v}" for k, v in entry["target"].items()
        )
        actor = names.of(entry["actor"].get("subjectId")) or "-"
        where = SURFACES.get(str(entry["actor"].get("surface")), "")
        what = audit_action_words(str(entry["action"]))
        print(f"{entry['chain']:>3}:{entry['seq']:<6}  {entry['at']}  {what:<30}  {f'{actor} {where}'.strip():<32}  {target}")
    if not page["entries"]:
        print("(no audit entries yet)")
    if page.get("cursor"):
        print(f"more: --cursor {page['cursor']}")
    return 0


def add_commands(sub: Any) -> None:
    audit = sub.add_parser("audit", help="the tenant's tamper-evident audit log").add_subparsers(
        dest="audit_command", required=True
    )
    verify = audit.add_parser("verify", help="re-walk the hash chains and the signed checkpoints (exit 2 if broken)")
    verify.add_argument("--from", dest="from_seq", type=int, default=1, help="first entry (default 1)")
    verify.add_argument("--to", dest="to_seq", type=int, help="last entry of each chain (default: its newest)")
    verify.add_argument("--chain", type=int, help="verify this chain only (default: every chain)")
    add_endpoint_args(verify, "audit:read")
    verify.set_defaults(func=_verify, in_process=False)

    listing = audit.add_parser("list", help="the tenant's audit entries, newest first")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--cursor")
    add_endpoint_args(listing, "audit:read")
    listing.set_defaults(func=_list, in_process=False)
