"""Definition and input files the CLI reads (`workflows validate|put FILE`, `runs start --input-file F`): JSON, each
refusal one line; and which face a definition is written for. Imports nothing of the service: `workflows put` and
`runs start` are clients of the HTTP API only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interlude.cli.client import CliError


def read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None


def face_of(raw: Any) -> str:
    """ModuleX for a `{workflow_schema}` body or a definition whose nodes carry `type`; OpenWOP otherwise."""
    if isinstance(raw, dict) and isinstance(raw.get("workflow_schema"), dict):
        return "modulex"
    nodes = raw.get("nodes") if isinstance(raw, dict) else None
    if isinstance(nodes, list) and nodes and all(isinstance(n, dict) and "type" in n and "typeId" not in n for n in nodes):
        return "modulex"
    return "openwop"
