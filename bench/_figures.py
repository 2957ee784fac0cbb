"""The figures docs/scale.md prints, generated from one `make bench` run (bench/summary.py --write-docs).

Each block sits between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` and is replaced whole; nothing between the
markers is written by hand. A document without the markers is left as it is.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from _prices import TTL_DELETION_LAG_DAYS, price
from ceiling import GOAL_DERIVED, SIDE_BY_SIDE, ceilings, goal_concurrency, outbox_rows
from ceiling import verdict as ceiling_verdict
from cost_per_million import RETAINED_MONTHS, bill, peer_total, peers, priced, retained, verdicts, with_tls

from interlude import wiring

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "`make bench` (`bench/summary.py --write-docs`)"


def stamp(measured: dict[str, Any]) -> str:
    load = ", ".join(f"{x:.1f}" for x in measured["load"])
    return f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}"


def goals_table(measured: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """Issue 31's goals: each figure, its goal, its verdict and the command that measured it."""
    rows = [(f, now, goal, "met" if met else "not met", "`bench/cost_per_million.py`") for f, now, goal, met in verdicts(priced(measured))]
    now, goal, met = ceiling_verdict(ceilings(measured))
    rows.append(("Lifecycles/s per deployment at default account quotas (paper)", now, goal, "met" if met else "not met", "`bench/ceiling.py`"))
    for result in results:
        command = str(result["command"])
        if "cost_per_million" in command or "ceiling" in command:
            continue
        row = result["row"]
        lines = "; ".join(concise(line) for line in result["lines"])  # type: ignore[union-attr]
        rows.append((row.name, lines, row.goal, str(result["verdict"] or "not measured"), f"`{command}`"))
    out = [f"Issue 31's goals as `make bench` last measured them ({stamp(measured)}; {COMMAND}):", "",
           "| Figure | Now | Goal | Verdict | Command |", "| --- | --- | --- | --- | --- |"]
    out += [f"| {f} | {n} | {g} | {v} | {c} |" for f, n, g, v, c in rows]
    return "\n".join(out)


def concise(line: str) -> str:
    """A script's figure line without its own goal and verdict (the table has columns for them)."""
    line = re.sub(r"\s*\(goal [^)]*\)", "", line)
    line = re.sub(r";\s*goal [^;]*$", "", line)
    return re.sub(r"\s{2,}", " ", line).strip()


def lifecycles_table(measured: dict[str, Any]) -> str:
    out = [
        f"Per lifecycle, us-east-1 list prices, one tenant at the busy ({measured['paces']['busy']:g}/s) and quiet "
        f"({measured['paces']['quiet']:g}/s) paces ({stamp(measured)}; `bench/cost_per_million.py`, counted by "
        "`bench/lifecycles.py`; the peers for the same work with what their user also pays):",
        "",
        "| Lifecycle | WRU busy / quiet | RRU | Invocations | $/M infrastructure, busy | all-in busy / quiet | Step Functions Standard | Temporal Cloud | Lambda durable functions (data rates estimated) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, found in measured["lifecycles"].items():
        busy, quiet = bill(measured, name, "busy"), bill(measured, name, "quiet")
        rru = sum(line.quantity for line in busy.infra if line.unit == "RRU")
        invocations = sum(line.quantity for line in busy.infra if line.name == "Lambda requests")
        ranges = [peer_total(measured, peer, lines) for peer, lines in peers(measured, name).items()]
        out.append(
            f"| ({name}) {found['title']} | {busy.wru():.1f} / {quiet.wru():.1f} | {rru:.1f} | {invocations:.2f} | "
            f"${busy.infra_per_million:.2f} | ${busy.all_in_per_million:.2f} / ${quiet.all_in_per_million:.2f} | "
            + " | ".join(f"${low:.0f}–{high:.0f}" for low, high in ranges)
            + " |"
        )
    return "\n".join(out)


def storage_table(measured: dict[str, Any]) -> str:
    """Storage per run and per million lifecycles (issue 30 item 4), from the items each lifecycle left, measured."""
    out = [
        f"Storage each lifecycle leaves, measured ({stamp(measured)}; `bench/lifecycles.py`: every item the lifecycle "
        "added or grew, each billed at its size + 100 B, GSI entries again), each kept from the run's end to its own "
        f"`ttl` as the lifecycle left it and then deleted by TTL (free; within {TTL_DELETION_LAG_DAYS} days, billed till "
        "then); a deployment doing a million lifecycles a month holds as many months of each item as it is kept, an item "
        f"with no `ttl` (kept for ever) {RETAINED_MONTHS:.0f} months here and a month more each month:",
        "",
        "| Lifecycle | Items | Bytes per run | GB per million lifecycles | Held at 1 M a month ($/month) | Not expired (bytes) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, found in measured["lifecycles"].items():
        stored = found["stored"]
        per_run = stored["bytes"] + stored["indexed_bytes"]
        gb = per_run * 1e6 / 1e9
        kept = sum(k["bytes"] for k in (stored.get("kinds") or {}).values() if not k["expiring"])
        out.append(
            f"| ({name}) {found['title']} | {stored['items']} | {per_run:,} | {gb:.2f} | "
            f"${retained(stored)[0] * 1e6 * price('dynamodb_storage_gb_month'):.2f} | {kept:,} |"
        )
    kinds = measured["lifecycles"]["a"]["stored"].get("kinds") or {}
    if kinds:
        out += ["", "Lifecycle (a)'s items by kind (bytes as billed; `expiring`: carrying the TTL attribute once the run ended):", "",
                "| Kind | Items | Bytes | Expiring |", "| --- | --- | --- | --- |"]
        out += [f"| {kind} | {k['items']} | {k['bytes']:,} | {k['expiring']} |" for kind, k in sorted(kinds.items())]
    return "\n".join(out)


def ceiling_table(measured: dict[str, Any]) -> str:
    found = ceilings(measured)
    out = [
        f"Lifecycles/s of one deployment at an account's default quotas, on paper ({stamp(measured)}; "
        "`bench/ceiling.py`: measured per-invocation CPU and counted units against the quotas):",
        "",
        "| Lifecycle | Deployment (as deployed by default) | With `account_concurrency_quota` (wiring's reservations) | One tenant (tenant-wide partitions) |",
        "| --- | --- | --- | --- |",
    ]
    for name, v in found.items():
        cells = [f"{v[k][1]:,.0f}/s: {v[k][0]}" for k in ("binding", "binding_reserved", "binding_tenant")]
        out.append(f"| ({name}) {v['title']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def dispatch_table(measured: dict[str, Any]) -> str:
    found = ceilings(measured)
    out = [
        f"`dispatch` per lifecycle ({stamp(measured)}; `bench/ceiling.py`: records and run-head reads counted, CPU "
        "measured, concurrency at full batches on paper):",
        "",
        "| Lifecycle | dispatch |",
        "| --- | --- |",
    ]
    out += [f"| ({name}) | {figures} |" for name, figures in outbox_rows(found)]
    out.append("")
    for function, source in GOAL_DERIVED.items():
        needed, given, covered = goal_concurrency(found, function)
        if function in SIDE_BY_SIDE:
            how, held = f"full batches of {SIDE_BY_SIDE[function]}, runs side by side", "its queue's maximum concurrency"
        else:
            how, held = f"a bucket's deadlines {wiring.DUE_BUCKET_WORKERS} at a time", "its reservation"
        out.append(f"At 2,000 lifecycles/s {function} needs {needed} concurrent invocations ({how}); {held} is {given} "
                   f"(`{source}`): {'covered' if covered else 'not covered'}.")
    return "\n".join(out)


def replace_block(path: Path, name: str, text: str) -> bool:
    source = path.read_text()
    pattern = re.compile(rf"(<!-- bench:{name} -->\n).*?(<!-- /bench:{name} -->)", re.S)
    if not pattern.search(source):
        return False
    path.write_text(pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), source))
    return True


def write_docs(measured: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    """The blocks rewritten (a document without a block's markers keeps what it has)."""
    measured = with_tls(measured)
    blocks = (
        ("docs/scale.md", "goals", goals_table(measured, results)),
        ("docs/scale.md", "lifecycles", lifecycles_table(measured)),
        ("docs/scale.md", "ceiling", ceiling_table(measured)),
        ("docs/scale.md", "dispatch", dispatch_table(measured)),
        ("docs/scale.md", "storage", storage_table(measured)),
    )
    return [f"{doc} ({name})" for doc, name, text in blocks if replace_block(ROOT / doc, name, text)]
