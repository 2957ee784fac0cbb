"""Only the Powertools resolver the API uses, not every resolver its `event_handler` package imports.

`aws_lambda_powertools.event_handler/__init__` imports every resolver Powertools has (AppSync's brings asyncio,
Bedrock's, VPC Lattice's, ...): about a fifth of `import boto3` at every cold start of the API function, which
uses one, `api_gateway.APIGatewayHttpResolver`. `skip_package_init()` registers the package without running its
`__init__`; importing a submodule (`event_handler.api_gateway`) then loads that submodule alone. The `__init__`
still runs, in full, the first time anything asks the package for a name it defines (`from
aws_lambda_powertools.event_handler import AppSyncResolver`, PEP 562's module `__getattr__`), so another importer in
the same process (a test, the local stack) sees the package exactly as Powertools ships it.

The resolver module imports its event classes by name from `utilities.data_classes`, whose `__init__` imports every
event data class (about as much again): that package is registered the same way, and a name its `__init__` imports
from a submodule (`from .alb_event import ALBEvent`) loads that submodule alone.

The route modules import from `event_handler.api_gateway` for the same reason (tests/unit/test_cold_imports.py).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

EVENT_HANDLER = "aws_lambda_powertools.event_handler"
# The resolver module imports seven event classes by name from this package, whose __init__ imports every event
# data class Powertools has (about forty modules, as much again as the resolver's own package).
DATA_CLASSES = "aws_lambda_powertools.utilities.data_classes"


def skip_package_init() -> None:
    """Register `event_handler` and `utilities.data_classes` unexecuted, unless something imported them already."""
    _lazy_package(EVENT_HANDLER, by_name=False)
    _lazy_package(DATA_CLASSES, by_name=True)


def _lazy_package(name: str, by_name: bool) -> None:
    """`by_name`: a name the package's __init__ imports from one of its submodules (`from .alb_event import
    ALBEvent`) is answered by importing that submodule alone; any other name runs the whole __init__ once."""
    if name in sys.modules:
        return
    parent_name, _, child = name.rpartition(".")
    parent = importlib.import_module(parent_name)
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.origin is None:  # pragma: no cover - a runtime dependency
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    source_of = _names_imported_from_submodules(Path(spec.origin)) if by_name else {}

    def __getattr__(attr: str) -> Any:
        if attr in source_of:
            value = getattr(importlib.import_module(f"{name}.{source_of[attr]}"), attr)
            package.__dict__[attr] = value
            return value
        # A submodule (`from ...event_handler import content_types`): not found here, the import system loads it.
        if importlib.util.find_spec(f"{name}.{attr}") is not None:
            raise AttributeError(attr)
        # Any other name: run the package's own __init__ once, then answer from it.
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, attr)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = package
    parent.__dict__[child] = package


def _names_imported_from_submodules(init: Path) -> dict[str, str]:
    """{name: submodule} for each `from .submodule import name` at the top of a package's __init__."""
    found: dict[str, str] = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and "." not in node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found
