"""Print what the first page an API instance renders costs beyond the same page on a warm instance.

The pages come from Jinja2 templates (interlude.api.page.templating): the first render imports Jinja2 and loads the
templates it uses, which the instance keeps. A checkout compiles them from their sources; the package layer ships
them compiled (templating.compile_all), and each root is also measured that way: its package copied and compiled as
interlude_cdk/layer.py builds the layer (Python bytecode aside, which every probe reads from a cache anyway). Each round is a fresh interpreter that imports the real API handler
(untimed), then renders, timed in CPU: the approval page of an approval gate with every action and a 13-step graph
(approval.document over render_open), then the console's inbox with three such requests and a run page (Jinja2 then
already loaded), each twice.
The page modules' own import is counted in the first render (a token or console route loads them anyway, but only
a page needs them). Per page: the first's CPU, the second's, and the difference (medians over the rounds), the
difference being what the instance paid once. Given other repository roots (`main`'s worktree, say), the rounds
alternate between them, so a change's first-render cost is compared in the same minutes.
Usage: .venv/bin/python bench/first_page.py [rounds] [other repository roots...]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import first_and_warm_rounds, print_paid_once

ROOT = Path(__file__).resolve().parent.parent
PROBE = r"""
import importlib.util, json, os, sys, time
root = sys.argv[1]
os.environ.update(AWS_DEFAULT_REGION="us-east-1", TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")
spec = importlib.util.spec_from_file_location("handler", os.path.join(root, "functions/api/handler.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from interlude.rules.interrupts.payloads import approval_resume_schema

actions = ["accept", "reject", "refine", "edit-accept", "ask"]
payload = {"kind": "approval", "key": "k", "resumeSchema": approval_resume_schema(actions),
           "data": {"title": "Publish the release notes?", "description": "Approve to publish.", "actions": actions,
                    "artifactType": "doc", "artifactData": {"title": "Notes", "body": "x" * 400}}}
timings = [{}, {}]

def timed(round, name, render):
    t0 = time.process_time()
    render()
    timings[round][name] = time.process_time() - t0

def approval_page():
    from interlude.api.page import approval
    from interlude.api.page.graph import GraphNode
    nodes = [GraphNode(f"step-{i}", "core.noop", "completed") for i in range(12)] + [GraphNode("gate", "core.approvalGate", "suspended")]
    edges = [(f"step-{i}", f"step-{i + 1}") for i in range(11)] + [("step-11", "gate")]
    view = approval.View(payload, "gate", "resolve", "waiting-approval", 1_900_000_000, nodes, edges, asked_by="Ada",
                         asked_at="2026-12-01T13:05:00Z", workflow_name="Release", time_zone="Europe/Paris")
    return approval.document("Publish?", approval.render_open(view, style_nonce="n", csrf_field="f" * 64), "n")

def console_pages():
    from interlude.api.console import pages
    from interlude.api.page.graph import GraphNode
    frame = pages.Frame(subject_id="ada", tenant="acme", proof="p" * 64)
    items = [{"interruptId": f"i{i}", "runId": f"acme/r-{i}", "nodeId": "gate", "workflowId": "release", "kind": "approval",
              "raisedAt": "2026-12-01T10:00:00Z", "payload": payload,
              "votes": [{"principal": "bo", "action": "accept", "at": "t", "surface": "console"}]} for i in range(3)]
    inbox = pages.document("Inbox", pages.inbox(frame, items, "cursor", None), "n", frame, "inbox")
    view = pages.RunView(
        snapshot={"runId": "acme/r-1", "workflowId": "release", "status": "waiting-approval", "startedAt": "t",
                  "extensions": {"interlude.run": {"workflowVersion": 1}}},
        nodes=[GraphNode("draft", "core.noop", "completed"), GraphNode("gate", "core.approvalGate", "suspended")],
        edges=[("draft", "gate")],
        open_interrupts={"gate": {**items[0], "mayDecide": True}},
        events=[{"sequence": i, "type": "node.completed", "nodeId": "draft", "timestamp": "t", "payload": {"i": i}} for i in range(20)],
        more_events_after=None, deliveries=[], notifications=[], tokens=[])
    return inbox + pages.document("Run", pages.run(frame, view, None), "n", frame, "runs")

for round in (0, 1):
    timed(round, "approval page", approval_page)
    timed(round, "console inbox + run", console_pages)
print(json.dumps(timings))
"""


COMPILE = "from interlude.api.page import templating\ntemplating.compile_all(templating.COMPILED_DIR)\n"


def as_shipped(root: Path, into: Path) -> Path | None:
    """A root whose package is copied and its templates compiled as the package layer ships it (None: a root from
    before the templates)."""
    package = root / "layers/core/python/interlude"
    if not (package / "api/page/templating.py").is_file():
        return None
    shutil.copytree(package, into / "layers/core/python/interlude", ignore=shutil.ignore_patterns("__pycache__"))
    (into / "functions").symlink_to(root / "functions")
    env = {"PYTHONPATH": str(into / "layers/core/python"), "PATH": ""}
    subprocess.run([sys.executable, "-c", COMPILE], env=env, check=True)
    return into


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    given = [ROOT, *(Path(p).resolve() for p in sys.argv[2:])]
    with tempfile.TemporaryDirectory(prefix="first-page-") as scratch:
        roots, names = [], {}
        for i, root in enumerate(given):
            roots.append(root)
            shipped = as_shipped(root, Path(scratch) / str(i))
            if shipped is not None:
                roots.append(shipped)
                names[shipped] = f"{root} (templates compiled, as the package layer ships them)"
        print_paid_once(first_and_warm_rounds(PROBE, roots, rounds), "render", names=names)


if __name__ == "__main__":
    main()
