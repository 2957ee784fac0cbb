"""The one declaration of how Interlude is wired: table layout, functions, their triggers and the routes.

The CDK stack (infra/), the local stack (interlude.local) and the tests all read this module, so the
deployed shape and the emulated shape cannot drift. Add a function, queue or route here first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --- the table -------------------------------------------------------------------------------------

TABLE_LOGICAL_NAME = "Table"
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl"
STREAM_VIEW = "NEW_IMAGE"


@dataclass(frozen=True)
class GlobalIndex:
    name: str
    partition_key: str
    sort_key: str


# Inbox: pending interrupts of a tenant, newest first (written only while an interrupt is open).
INBOX_INDEX = GlobalIndex(name="inbox", partition_key="gsi1pk", sort_key="gsi1sk")
GLOBAL_INDEXES = (INBOX_INDEX,)


def key_attributes() -> list[tuple[str, str]]:
    """Every attribute that appears in a key schema, with its DynamoDB type ("S" throughout)."""
    names = [PARTITION_KEY, SORT_KEY]
    for index in GLOBAL_INDEXES:
        names += [index.partition_key, index.sort_key]
    return [(name, "S") for name in names]


# The stream feeds `dispatch` with new event-log items only (sk begins with "E#").
EVENT_ITEM_PREFIX = "E#"

# --- functions -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Function:
    name: str
    # Module path under functions/<name>/ whose `lambda_handler` is the entry point.
    handler: str
    memory_mb: int = 512
    timeout_s: int = 29
    # DynamoDB actions this function's role is granted on the table (least privilege).
    table_actions: tuple[str, ...] = ()
    reads_stream: bool = False
    description: str = ""


FUNCTIONS: tuple[Function, ...] = (
    Function(
        name="api",
        handler="handler.lambda_handler",
        description="Every HTTP route (OpenWOP v2 and ModuleX faces)",
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
        ),
    ),
    Function(
        name="dispatch",
        handler="handler.lambda_handler",
        timeout_s=60,
        description="Table stream consumer: the outbox that advances runs and runs side effects",
        reads_stream=True,
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
        ),
    ),
)


def function(name: str) -> Function:
    return next(f for f in FUNCTIONS if f.name == name)


# Stream → dispatch settings, shared by the event source mapping and the local pump.
STREAM_BATCH_SIZE = 25
STREAM_MAX_RETRIES = 10

# --- routes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # API Gateway syntax: /runs/{runId}
    operation: str
    scope: str | None  # None: no API key (discovery, token surfaces)
    summary: str = ""
    mutating: bool = field(default=False)


ROUTES: tuple[Route, ...] = (
    Route("GET", "/.well-known/openwop", "getCapabilities", None, "Discovery document"),
    Route("GET", "/openapi.json", "getOpenApi", None, "This API's OpenAPI document"),
    Route("PUT", "/workflows/{workflowId}", "putWorkflow", "workflows:write", "Register a new workflow version", True),
    Route("GET", "/workflows/{workflowId}", "getWorkflow", "workflows:read", "Latest workflow version"),
    Route("POST", "/runs", "createRun", "runs:create", "Start a run", True),
    Route("GET", "/runs/{runId}", "getRun", "runs:read", "Run snapshot"),
    Route("POST", "/runs/{runId}/cancel", "cancelRun", "runs:cancel", "Cancel a run", True),
    Route("GET", "/runs/{runId}/events/poll", "pollRunEvents", "runs:read", "Long-poll the event log"),
    Route(
        "POST",
        "/runs/{runId}/interrupts/{nodeId}",
        "resolveInterruptByRun",
        "approvals:respond",
        "Resolve the interrupt a node holds",
        True,
    ),
    Route("POST", "/keys", "createKey", "keys:admin", "Create an API key", True),
)

# The function every route above is integrated with (API Gateway in the stack, the HTTP server locally).
ROUTES_FUNCTION = "api"

ALL_SCOPES = (
    "workflows:write",
    "workflows:read",
    "runs:create",
    "runs:read",
    "runs:cancel",
    "approvals:respond",
    "events:write",
    "keys:admin",
)
