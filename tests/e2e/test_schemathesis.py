"""schemathesis against a local stack of its own, generating requests from /openapi.json: no answer is a server
error, and every answer's status, content type, headers and body are the ones the document declares for its
operation (so an operation never answers an error code it does not declare: each status's schema lists them).

A bounded budget (EXAMPLES per operation, a fixed seed, one worker) keeps it to well under a minute and the
same run every time. The figures are in the README's testing section; to reproduce them by hand, see there.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.local_stack import running_stack

EXAMPLES = 3
SEED = 20261201
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


def schemathesis_command(base_url: str, api_key: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--no-color",
        "run",
        f"{base_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {api_key}",
        "--checks",
        ",".join(CHECKS),
        "--phases",
        # Generated requests, valid and invalid; the coverage phase (every boundary of every schema, ~1,400
        # requests here) is too long for the suite: run it by hand with `--phases coverage` (README, Testing).
        "fuzzing",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--request-timeout",
        "30",
    ]


def test_every_answer_is_the_documented_one(tmp_path) -> None:
    # Long polls (pollRunEvents, claimTask's waitSeconds) held at most a second: the answers are the same.
    with running_stack(tmp_path, {"INTERLUDE_MAX_POLL_SECONDS": "1"}) as info:
        done = subprocess.run(
            schemathesis_command(info["baseUrl"], info["apiKey"]),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-6000:]
    operations = re.search(r"Tested: (\d+)", report)
    generated = re.search(r"(\d+) generated", report)
    assert operations, report[-2000:]
    assert generated, report[-2000:]
    print(f"schemathesis: {operations[1]} operations, {generated[1]} requests, 0 failures")
    assert "Server error" not in report
    assert "violates schema" not in report
