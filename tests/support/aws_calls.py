"""Every AWS API call the suite makes, recorded as the IAM requests it stands for, with the role that would sign it
(issue 25, item 2; tests/support/iam_check.py evaluates them against the synthesized template).

A botocore `before-parameter-build` handler sees each call before it is sent. It is installed in the test processes
(tests/support/iam_plugin.py) and, through the local stack's process hook (interlude.local.lambda_runtime), in every
process a local stack runs functions in. Whose role a call belongs to:

* inside a function's invocation (interlude.local.lambda_runtime.invoke: the in-process runs of the integration
  tests, and every invocation of a local stack), that function's: CURRENT_FUNCTION says which;
* a test's direct call into the package (a service's method, an app function, a worker's `handle`) is recorded with
  its entry point, the outermost frame of the package on the stack, and belongs to every function the session saw
  running that entry point (each invocation records the code paths it runs: `reach` lines);
* anything the local stack or the CLI does on its own (creating tables and queues, polling, operator commands) and
  a test's own boto3 calls belong to no role and are not recorded.

A call becomes one or more IAM requests: the action DynamoDB, SQS, Secrets Manager, Scheduler, SES and KMS
authorize (a transaction's items one by one, a batch as its single action, what an option implies such as
iam:PassRole for a schedule's role), the resource by the environment variable the function found it through (the
template says what each variable holds where it is deployed), and the values of the condition keys the template
uses. Each distinct request (by the shape of its keys, not every id) is written once per process, as a JSON line,
the moment it is first seen: an instance pool's process is terminated, not exited.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import uuid
from email.utils import parseaddr
from pathlib import Path
from typing import Any

from interlude import wiring
from interlude.config import Settings
from interlude.config.notify import SES_CONFIGURATION_SET_ENV, SES_FROM_ADDRESS_ENV
from interlude.local.lambda_runtime import CURRENT_FUNCTION

LOG_DIR_ENV = "INTERLUDE_AWS_CALL_LOG"
PROCESS_HOOK = "tests.support.aws_calls:install"

# Where a function finds each resource: environment variables, with the default its code falls back to.
TABLE_ENV = wiring.TABLE_NAME_ENV
# The second table (wiring.ENTRIES_TABLE): a call on it is checked against the entries table's ARN.
TABLE_ENVS = tuple(spec.env for spec in wiring.TABLES)
QUEUE_ENVS = tuple(q.url_env for q in wiring.QUEUES)
_DEFAULTS = Settings(table_name="", entries_table_name="")
SECRET_ENVS = {
    wiring.KEY_RING_SECRET.env: _DEFAULTS.key_ring_secret,
    wiring.AUDIT_KEY_SECRET.env: _DEFAULTS.audit_key_secret,
}
SECRET_PREFIX_ENVS = dict(wiring.SECRET_PREFIXES)
SCHEDULE_GROUP_ENV, _, SCHEDULER_ROLE_ENV, _ = wiring.SCHEDULES.environment
KMS_KEY_ENV = wiring.CREATED_SECRETS_KMS_KEY_ENV
BUCKET_ENVS = tuple(bucket.env for bucket in wiring.BUCKETS)
SES_IDENTITY_ENV = SES_FROM_ADDRESS_ENV
SES_CONFIGURATION_ENV = SES_CONFIGURATION_SET_ENV
PARTITION_KEYS = {wiring.PARTITION_KEY} | {index.partition_key for index in wiring.GLOBAL_INDEXES}

# DynamoDB's transaction items and batch calls, as IAM authorizes them.
TRANSACT_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
SQS_BATCH_ACTIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
# S3 operations on an object, by the action IAM authorizes them as (a version's own when a VersionId is given).
S3_OBJECT_ACTIONS = {
    "GetObject": "GetObject",
    "HeadObject": "GetObject",
    "PutObject": "PutObject",
    "DeleteObject": "DeleteObject",
}
S3_LISTINGS = ("ListObjects", "ListObjectsV2", "ListObjectVersions", "HeadBucket")
SCHEDULER_SERVICE = "scheduler.amazonaws.com"
_KEY_EQUALS = re.compile(r"(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)")
_SHAPE_WORD = re.compile(r"[A-Z]{1,16}")


def resource(kind: str, env: str | None = None, name: str = "", rest: str = "") -> dict[str, str]:
    """A resource as the function found it: through environment variable `env` (then `rest` is what follows its
    value: an index, a secret's name after its prefix, a schedule's name), or by `name` alone."""
    out = {"kind": kind}
    if env:
        out["env"] = env
    if name:
        out["name"] = name
    if rest:
        out["rest"] = rest
    return out


def _env(var: str, default: str = "") -> str:
    return os.environ.get(var) or default


def _table(name: str, rest: str = "") -> dict[str, str]:
    for var in TABLE_ENVS:
        if name and name == _env(var):
            return resource("table", var, rest=rest)
    return resource("table", name=name, rest=rest)


def _queue(url: str) -> dict[str, str]:
    for var in QUEUE_ENVS:
        if url and url == os.environ.get(var):
            return resource("queue", var)
    return resource("queue", name=url.rstrip("/").rsplit("/", 1)[-1])


def _secret_name(secret_id: str) -> str:
    """A secret's name from its name or ARN (Secrets Manager appends six characters to the name in an ARN)."""
    if secret_id.startswith("arn:"):
        return secret_id.split(":secret:", 1)[1][:-7]
    return secret_id


def _secret(secret_id: str) -> dict[str, str]:
    name = _secret_name(secret_id)
    for var, default in SECRET_ENVS.items():
        if name == _secret_name(_env(var, default)):
            return resource("secret", var)
    prefixes = sorted(((_env(var, default), var) for var, default in SECRET_PREFIX_ENVS.items()), reverse=True)
    for prefix, var in prefixes:
        if name.startswith(prefix):
            return resource("secret", var, rest=name[len(prefix) :])
    return resource("secret", name=name)


def _named(kind: str, var: str, value: str) -> dict[str, str]:
    return resource(kind, var) if value and value == os.environ.get(var) else resource(kind, name=value)


def _s3_requests(op: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    bucket, key = params["Bucket"], params.get("Key")
    var = next((v for v in BUCKET_ENVS if bucket == os.environ.get(v)), None)
    found = (
        resource("bucket", var, rest=f"/{key}" if key else "")
        if var
        else resource("bucket", name=bucket, rest=f"/{key}" if key else "")
    )
    if key is not None and op in S3_OBJECT_ACTIONS:
        action = S3_OBJECT_ACTIONS[op] + ("Version" if params.get("VersionId") and op != "PutObject" else "")
        out = [{"action": f"s3:{action}", "resource": found}]
        if op == "PutObject" and params.get("ObjectLockMode"):
            out.append({"action": "s3:PutObjectRetention", "resource": found})
        if op == "PutObject" and params.get("ObjectLockLegalHoldStatus"):
            out.append({"action": "s3:PutObjectLegalHold", "resource": found})
        return out
    if op in S3_LISTINGS:
        action = "ListBucketVersions" if op == "ListObjectVersions" else "ListBucket"
        prefix = {"s3:prefix": params["Prefix"]} if "Prefix" in params else {}
        return [{"action": f"s3:{action}", "resource": found, **({"context": prefix} if prefix else {})}]
    return [{"action": f"s3:{op}", "resource": found}]


def _partition_key(item: dict[str, Any] | None) -> list[str]:
    value = (item or {}).get(wiring.PARTITION_KEY, {}).get("S")
    return [value] if value is not None else []


def _queried_partition(params: dict[str, Any]) -> list[str]:
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    for name, placeholder in _KEY_EQUALS.findall(params.get("KeyConditionExpression") or ""):
        if names.get(name, name) in PARTITION_KEYS and "S" in values.get(placeholder, {}):
            return [values[placeholder]["S"]]
    return []


def dynamodb_requests(op: str, params: dict[str, Any]) -> list[tuple[str, dict[str, str], list[str]]]:
    """(action, resource, leading keys) of each request a DynamoDB call is authorized as."""
    if op in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for entry in params.get("TransactItems") or []:
            ((kind, item),) = entry.items()
            keys = _partition_key(item.get("Key") or item.get("Item"))
            out.append((TRANSACT_ITEM_ACTIONS[kind], _table(item["TableName"]), keys))
        return out
    if op == "BatchGetItem":
        return [
            (op, _table(table), [k for key in request.get("Keys", []) for k in _partition_key(key)])
            for table, request in (params.get("RequestItems") or {}).items()
        ]
    if op == "BatchWriteItem":
        out = []
        for table, writes in (params.get("RequestItems") or {}).items():
            keys = [
                k
                for write in writes
                for k in _partition_key(
                    (write.get("PutRequest") or {}).get("Item") or (write.get("DeleteRequest") or {}).get("Key")
                )
            ]
            out.append((op, _table(table), keys))
        return out
    if "TableName" not in params:
        return [(op, resource("any"), [])]
    index = f"/index/{params['IndexName']}" if params.get("IndexName") else ""
    table = _table(params["TableName"], index)
    if op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
        return [(op, table, _partition_key(params.get("Key") or params.get("Item")))]
    if op == "Query":
        return [(op, table, _queried_partition(params))]
    return [(op, table, [])]


def requests_of(service: str, op: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The IAM requests one API call is authorized as: {action, resource, keys?, context?}."""
    if service == "dynamodb" and op in ("GetRecords", "GetShardIterator", "DescribeStream", "ListStreams"):
        return [{"action": f"dynamodb:{op}", "resource": resource("stream")}]
    if service == "dynamodb":
        return [
            {"action": f"dynamodb:{action}", "resource": found, **({"keys": keys} if keys else {})}
            for action, found, keys in dynamodb_requests(op, params)
        ]
    if service == "sqs":
        target = _queue(params["QueueUrl"]) if "QueueUrl" in params else resource("any")
        return [{"action": f"sqs:{SQS_BATCH_ACTIONS.get(op, op)}", "resource": target}]
    if service == "secretsmanager":
        secret_id = params.get("SecretId") or params.get("Name")
        target = _secret(secret_id) if secret_id else resource("any")
        out = [{"action": f"secretsmanager:{op}", "resource": target}]
        if op == "CreateSecret" and params.get("Tags"):
            out.append({"action": "secretsmanager:TagResource", "resource": target})
        if op == "CreateSecret" and params.get("KmsKeyId"):
            key = _named("key", KMS_KEY_ENV, params["KmsKeyId"])
            via = {"kms:ViaService": "secretsmanager.{region}.amazonaws.com"}
            out += [{"action": f"kms:{a}", "resource": key, "context": via} for a in ("GenerateDataKey", "Decrypt")]
        return out
    if service == "scheduler":
        if "Name" not in params:
            return [{"action": f"scheduler:{op}", "resource": resource("any")}]
        group = params.get("GroupName") or "default"
        found = (
            resource("schedule", SCHEDULE_GROUP_ENV, rest=params["Name"])
            if group == _env(SCHEDULE_GROUP_ENV)
            else resource("schedule", name=group, rest=params["Name"])
        )
        out = [{"action": f"scheduler:{op}", "resource": found}]
        role = (params.get("Target") or {}).get("RoleArn")
        if role:
            passed = {"iam:PassedToService": SCHEDULER_SERVICE}
            out.append(
                {"action": "iam:PassRole", "resource": _named("role", SCHEDULER_ROLE_ENV, role), "context": passed}
            )
        return out
    if service == "execute-api" and "ConnectionId" in params:
        # API Gateway's management API: every operation on a connection is authorized as ManageConnections, on
        # `{api}/{stage}/{method}/@connections/{id}` of the API the endpoint (wiring.LIVE_API.endpoint_env) names.
        method = {"PostToConnection": "POST", "GetConnection": "GET", "DeleteConnection": "DELETE"}[op]
        rest = f"/{method}/@connections/{params['ConnectionId']}"
        return [{"action": wiring.MANAGE_CONNECTIONS_ACTION, "resource": resource("connection", wiring.LIVE_API.endpoint_env, rest=rest)}]
    if service == "s3" and "Bucket" in params:
        return _s3_requests(op, params)
    if service == "ses" and op in ("SendEmail", "SendRawEmail"):
        sender = params.get("FromEmailAddress") or params.get("Source") or ""
        out = [{"action": f"ses:{op}", "resource": _named("ses-identity", SES_IDENTITY_ENV, parseaddr(sender)[1])}]
        if params.get("ConfigurationSetName"):
            configuration = _named("ses-configuration-set", SES_CONFIGURATION_ENV, params["ConfigurationSetName"])
            out.append({"action": f"ses:{op}", "resource": configuration})
        return out
    return [{"action": f"{service}:{op}", "resource": resource("any")}]


def shape(value: str) -> str:
    """A key's shape: its upper-case words kept, every id replaced by `*` (`T#t1#AUDIT#007` → `T#*#AUDIT#*`)."""
    return "#".join(part if _SHAPE_WORD.fullmatch(part) else "*" for part in value.split("#"))


HARNESS = ("interlude.local.", "interlude.cli")
# A code object's `module:qualname` when it is the package's (None otherwise), and whether it is a method: worked
# out once per function.
_PATHS: dict[Any, tuple[str, bool] | None] = {}


def _package_frames(frame: Any) -> list[str]:
    """`module:qualname` of the package's frames on the stack, innermost first (the local stack's included). A method
    is named after the class of its `self`: a template method a base class defines (adapters.leased_work's `handle`)
    runs as each worker's own, so a test calling one worker directly is not taken for the others."""
    out = []
    while frame is not None:
        code = frame.f_code
        known = _PATHS.get(code, False)
        if known is False:
            module = frame.f_globals.get("__name__", "")
            method = code.co_argcount > 0 and code.co_varnames[0] == "self"
            known = _PATHS[code] = (f"{module}:{code.co_qualname}", method) if module.startswith("interlude.") else None
        if known is not None:
            path, method = known
            cls = type(frame.f_locals.get("self")) if method else None
            if cls is not None and cls.__module__.startswith("interlude."):
                path = f"{cls.__module__}:{cls.__qualname__}.{code.co_name}"
            out.append(path)
        frame = frame.f_back
    return out


class Recorder:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file = (directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl").open("a", buffering=1)
        self._seen: set[Any] = set()
        self._reached: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def _write(self, key: Any, line: dict[str, Any]) -> None:
        with self._lock:
            if key not in self._seen:
                self._seen.add(key)
                self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def on_call(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        function = CURRENT_FUNCTION.get()
        frames = _package_frames(sys._getframe(1))
        if function is not None:
            reached = self._reached.setdefault(function, set())
            for path in frames:
                if path not in reached and not path.startswith(HARNESS):
                    reached.add(path)
                    self._write(("reach", function, path), {"reach": function, "path": path})
            who: dict[str, str] = {"function": function}
        else:
            if not frames or any(path.startswith(HARNESS) for path in frames):
                return
            who = {"entry": frames[-1]}
        service, op = model.service_model.signing_name, model.name
        for request in requests_of(service, op, params):
            found = request["resource"]
            key = (
                function or who["entry"],
                request["action"],
                found["kind"],
                found.get("env"),
                found.get("name"),
                # An index is part of what is granted; an object's folder too (its name is the tenant's).
                found.get("rest") if found["kind"] == "table" else found.get("rest", "").rpartition("/")[0],
                tuple(sorted({shape(k) for k in request.get("keys", ())})),
            )
            if key in self._seen:
                continue
            test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
            self._write(key, {**who, "call": f"{service}.{op}", **request, **({"test": test} if test else {})})


_installed: Recorder | None = None


def install() -> None:
    """Record this process's calls into LOG_DIR_ENV's directory (from now on; once per process)."""
    global _installed
    directory = os.environ.get(LOG_DIR_ENV)
    if _installed is not None or not directory:
        return
    import botocore.handlers

    from interlude import sdk_clients

    _installed = Recorder(Path(directory))
    handler = ("before-parameter-build", _installed.on_call)
    # Every botocore session registers the built-in handlers when it is made; the functions' one may exist already.
    botocore.handlers.BUILTIN_HANDLERS.append(handler)
    held = sdk_clients.held()
    if held is not None:
        held.register(*handler)
