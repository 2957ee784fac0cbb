"""Only the Powertools resolver the API uses, not every resolver its `event_handler` package imports.

`aws_lambda_powertools.event_handler/__init__` imports every resolver Powertools has (AppSync's brings asyncio,
Bedrock's, VPC Lattice's, ...): about a fifth of `import boto3` at every cold start of the API function, which
uses one, `api_gateway.APIGatewayHttpResolver`. `skip_package_init()` registers the package without running its
`__init__`; importing a submodule (`event_handler.api_gateway`) then loads that submodule alone. The `__init__`
still runs, in full, the first time anything asks the package for a name it defines (`from
aws_lambda_powertools.event_handler import AppSyncResolver`, PEP 562's module `__getattr__`), so another importer in
the same process (a test, the local stack) sees the package exactly as Powertools ships it.

The route modules import from `event_handler.api_gateway` for the same reason (tests/unit/test_cold_imports.py).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

EVENT_HANDLER = "aws_lambda_powertools.event_handler"


def skip_package_init() -> None:
    """Register `aws_lambda_powertools.event_handler` unexecuted, unless something imported it already."""
    if EVENT_HANDLER in sys.modules:
        return
    import aws_lambda_powertools

    spec = importlib.util.find_spec(EVENT_HANDLER)
    if spec is None or spec.loader is None:  # pragma: no cover - Powertools is a runtime dependency
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> Any:
        # A submodule (`from ...event_handler import content_types`): not found here, the import system loads it.
        if importlib.util.find_spec(f"{EVENT_HANDLER}.{name}") is not None:
            raise AttributeError(name)
        # Any other name: run the package's own __init__ once, then answer from it.
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[EVENT_HANDLER] = package
    aws_lambda_powertools.__dict__["event_handler"] = package
