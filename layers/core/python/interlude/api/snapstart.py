"""What an api instance restored from a SnapStart snapshot is handed ready, and what it must not share with the other
instances restored from it.

With `api_snap_start` (interlude_cdk.InterludeProps), Lambda runs the api function's initialization once, when a
version is published, and starts every new instance from that one snapshot. functions/api/handler.py registers both
hooks with the runtime's `snapshot_restore_py`: `before_snapshot` builds what a first request would otherwise build
(paid once, at publication), `after_restore` lets go of what the snapshot would otherwise hand every instance alike;
each step says which. Nothing is imported to be reset: what the snapshot did not load holds nothing yet.
"""

from __future__ import annotations

import random
import sys

# Loaded-module name -> a cached factory whose object holds a client or a fetched key ring: made again on first use.
CACHED = (
    # The services: their Store's DynamoDB client, the limiter's windows, the caches of keys and workflows.
    ("interlude.composition", "services"),
    # The token surface: the services and the key ring it read.
    ("interlude.api.tokens", "surface"),
    # The idempotency records: the services' store.
    ("interlude.api.idempotency", "records"),
    # The outboxes' SQS client.
    ("interlude.adapters.queues", "_sqs"),
    # The audit anchors' S3 client (GET /audit/verify).
    ("interlude.adapters.audit_anchor", "_s3"),
)
CONSOLE_ROUTES = "interlude.api.console.routes"


def before_snapshot() -> None:
    # Every route module (a cold request imports only its own; a restored one then imports none).
    from interlude.api.app import load_all_routes

    load_all_routes()
    # The services and their DynamoDB client: the client is made again after restore, from the models parsed here
    # (interlude/sdk_clients.py keeps botocore's loader).
    from interlude.composition import services

    services()
    # The JSON Schema validator every decision on a gate with a resume schema builds (rules/interrupts/decide.py).
    import jsonschema  # noqa: F401


def after_restore() -> None:
    # `random` seeded once at init would draw the same retry jitter and shard picks in every restored instance.
    random.seed()
    for module_name, factory in CACHED:
        module = sys.modules.get(module_name)
        if module is not None:
            getattr(module, factory).cache_clear()
    console = sys.modules.get(CONSOLE_ROUTES)
    if console is not None:
        # The ring re-read's rate limit is a lease on the monotonic clock of the snapshotted instance.
        console._last_ring_refetch[0] = float("-inf")
    from interlude.sdk_clients import forget_clients

    forget_clients()
