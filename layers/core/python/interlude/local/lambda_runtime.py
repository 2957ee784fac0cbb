"""Invoke the real Lambda handlers (functions/<name>/handler.py) in-process, as Lambda would."""

from __future__ import annotations

import importlib.util
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import wiring

REPO_ROOT = Path(__file__).resolve().parents[5]


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@cache
def handler_module(name: str) -> ModuleType:
    fn = wiring.function(name)
    module_file, _, _ = fn.handler.rpartition(".")
    path = REPO_ROOT / "functions" / name / f"{module_file}.py"
    spec = importlib.util.spec_from_file_location(f"interlude_function_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def invoke(name: str, event: dict[str, Any]) -> Any:
    fn = wiring.function(name)
    entry = getattr(handler_module(name), fn.handler.rpartition(".")[2])
    return entry(event, LambdaContext(function_name=f"interlude-{name}", memory_limit_in_mb=fn.memory_mb))
