"""What every bench shares: an offline AWS environment, and counting the AWS calls it makes."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

# Benches reuse the tests' support modules (fixture paths, the stream reader): the repo root must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def offline_aws(**settings: str) -> None:
    """Fake credentials and no endpoint override, before any client exists: benches run on moto in-process."""
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1", **settings
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)


class Calls:
    """Count calls made through the watched clients (or a whole session), optionally only some services."""

    def __init__(self, *clients: Any, services: tuple[str, ...] | None = None, qualified: bool = False) -> None:
        self.counter: Counter[str] = Counter()
        self.services = services
        self.qualified = qualified
        for client in clients:
            self.watch(client)

    def watch(self, emitter: Any) -> None:
        """A client, or a boto3 Session (its events object) to count every client it makes."""
        events = emitter.meta.events if hasattr(emitter, "meta") else emitter.events
        events.register("before-call", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        if self.services is None or service in self.services:
            self.counter[f"{model.service_model.service_name}:{model.name}" if self.qualified else model.name] += 1

    def take(self) -> Counter[str]:
        taken, self.counter = self.counter, Counter()
        return taken


def fmt(c: Counter[str]) -> str:
    return f"{sum(c.values())} ({', '.join(f'{k}×{v}' for k, v in sorted(c.items())) or '-'})"


def admin_with_approval(service: Any) -> tuple[Any, str, str]:
    """An every-scope admin key of tenant `bench` and the approval fixture registered under its own id:
    (principal, bearer header, workflow id). Imported late: `offline_aws` must run before any client exists."""
    import json

    from interlude import wiring
    from interlude.domain.models.requests import CreateKeyRequest
    from interlude.domain.models.workflow import WorkflowDefinition
    from tests.support.local_stack import FIXTURES

    created = service.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
    bearer = f"Bearer {created['apiKey']}"
    principal = service.authenticate(bearer)
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    service.put_workflow(principal, definition["id"], WorkflowDefinition.model_validate(definition))
    return principal, bearer, definition["id"]
