"""The README's curl walk-through and the reference's decision-link snippet, and every Python snippet of the README and
the docs its reference moved to (issue 27, item 8), run as written against the local stack."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
# The README and the reference documents its sections moved to, in reading order: their snippets are run here.
DOCS = [
    README,
    *(README.parent / "docs" / f"{name}.md" for name in ("cli", "api", "modulex", "gates", "configuration", "limits", "deploying", "testing")),
]


def section(heading: str) -> str:
    """The text after the heading that starts with `heading`, in whichever of DOCS holds it (exactly one does)."""
    holders = [doc for doc in DOCS if f"\n{heading}" in doc.read_text()]
    assert len(holders) == 1, (heading, holders)
    return holders[0].read_text().split(f"\n{heading}", 1)[1]


def first_sh_block(heading: str) -> str:
    return re.search(r"```sh\n(.*?)```", section(heading), re.S).group(1)


def walkthrough() -> str:
    return first_sh_block("## Walk-through with curl")


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_readme_walkthrough_runs_as_written(stack_info, tmp_path):
    (tmp_path / ".interlude").mkdir()
    (tmp_path / ".interlude" / "local.json").write_text(json.dumps(stack_info))
    script = "set -euo pipefail\n" + walkthrough()
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"status":"waiting-approval"' in out.stdout
    assert '"currentNodeId":"review"' in out.stdout
    assert '"status":"completed"' in out.stdout
    assert '"type":"run.completed"' in out.stdout


def python_snippets() -> list[str]:
    return [snippet for doc in DOCS for snippet in re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)]


def test_the_readme_has_the_python_snippets_these_tests_run():
    # The SSE follower, the ModuleX client, the CDK app: if one is added, it is run below like the others.
    assert len(python_snippets()) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_snippets())))
def test_every_readme_python_snippet_runs_as_pasted(stack_info, tmp_path, index):
    """Each block as pasted into a file and run with Python from a directory where `make dev` wrote its state
    file: nothing defined elsewhere, no bare `await`, a complete definition."""
    from tests.infra.conftest import OFFLINE_AWS, stand_in_layer

    snippet = python_snippets()[index]
    (tmp_path / ".interlude").mkdir()
    (tmp_path / ".interlude" / "local.json").write_text(json.dumps(stack_info))
    (tmp_path / "snippet.py").write_text(snippet)
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    # This checkout's packages, as `pip install` of it would provide them.
    env["PYTHONPATH"] = os.pathsep.join([str(README.parent / "layers/core/python"), str(README.parent / "infra")])
    if "interlude_cdk" in snippet:
        # A layer directory stands in for `make layer`'s output (no wheels fetched), and no AWS account is asked.
        layer = stand_in_layer(tmp_path / "layer")
        env.update({**OFFLINE_AWS, "CDK_CONTEXT_JSON": json.dumps({"layerDir": str(layer)}), "CDK_OUTDIR": str(tmp_path / "cdk.out")})
    out = subprocess.run(
        [sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if "runs_events" in snippet:
        assert "run.completed" in out.stdout
    if "Modulex(" in snippet:
        assert out.stdout.startswith("Send this reply?")
    if "interlude_cdk" in snippet:
        assert (tmp_path / "cdk.out" / "Approvals.template.json").exists()


def decision_link_snippet() -> str:
    return first_sh_block("### Decision links")


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_decision_link_snippet_makes_its_own_waiting_run_and_decides_it_through_the_link(stack_info, tmp_path):
    (tmp_path / ".interlude").mkdir()
    (tmp_path / ".interlude" / "local.json").write_text(json.dumps(stack_info))
    # Only what the walk-through's first lines define (BASE, KEY, H): no run of the walk-through is reused.
    setup = "\n".join(line for line in walkthrough().splitlines() if line.startswith(("BASE=", "KEY=", "H=")))
    script = "set -euo pipefail\n" + setup + "\n" + decision_link_snippet()
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"kind":"approval"' in out.stdout or '"kind": "approval"' in out.stdout
    assert '"status":"completed"' in out.stdout


def worker_block() -> str:
    return first_sh_block("## Running a task worker")


@pytest.mark.slow
def test_the_task_worker_block_runs_the_worked_example_as_written(stack_info, tmp_path):
    # A checkout as the block expects one: the stack's state file, the examples, and .venv/bin/python (this one).
    (tmp_path / ".interlude").mkdir()
    (tmp_path / ".interlude" / "local.json").write_text(json.dumps(stack_info))
    (tmp_path / "examples").symlink_to(README.parent / "examples")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ENDPOINT_URL", "INTERLUDE_WORKER_BEDROCK_MODEL")}
    env["PYTHONPATH"] = os.pathsep.join([str(README.parent / "layers/core/python"), str(README.parent)])
    script = "set -euo pipefail\n" + worker_block()
    # Files, not pipes: the worker the block stops goes on holding its output until its last claim ends.
    with (tmp_path / "out").open("w") as stdout, (tmp_path / "err").open("w") as stderr:
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, stdout=stdout, stderr=stderr, timeout=240)
    assert done.returncode == 0, (tmp_path / "err").read_text()[-3000:]
    printed = (tmp_path / "out").read_text()
    draft = "Echo draft: Write a reply to: the refund"
    assert printed.startswith(f"Approve sending this draft?\n\n{draft}\n")
    sent = json.loads(printed.strip().splitlines()[-1])
    assert (sent["to"], sent["body"]) == ("ana@example.com", draft)


def gate_examples() -> list[dict]:
    gates = section("## Gates").split("\n## ", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", gates, re.S)]


def test_every_gate_example_in_the_readme_registers_as_written(api):
    # One realistic example per gate type, each a node (or a small workflow) a tenant can register as it is.
    examples = gate_examples()
    assert len(examples) == 6
    types = set()
    for example in examples:
        definition = example if "nodes" in example else {"nodes": [example], "edges": []}
        types |= {n["typeId"] for n in definition["nodes"]}
        got = api.put_workflow(f"readme-gate-{uuid.uuid4().hex[:8]}", definition)
        assert got.status_code == 201, (example, got.text)
    # Every gate type has its example (beside the steps an example routes to, as a refine's)
    assert types >= {
        "core.approvalGate",
        "core.clarificationGate",
        "core.interrupt",
        "core.confidenceGate",
        "core.credentialGate",
        "core.conversationGate",
    }
