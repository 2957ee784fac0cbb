"""The README's curl walk-through, run as written against the local stack."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> str:
    text = README.read_text()
    section = text.split("## Walk-through with curl", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


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
