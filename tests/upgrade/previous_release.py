"""The previous release's side of the upgrade test (issue 30, item 3), run with THAT release's `interlude` package
first on PYTHONPATH (never this checkout's): it imports nothing of the tests and speaks to its own local stack over
its HTTP API only, so it keeps working whatever this release changes.

  write OUT   runs the previous release's local stack and leaves runs in every state (waiting at each gate kind,
              sleeping, running a task and an action, a parent waiting on its child, failed, completed,
              cancelled), a ModuleX workflow, settings, a directory entry and keys; then writes every table item
              (`items`; a release with a second table, 0.5.0 on: its items too, `entriesItems`), every pending
              schedule and what it made to OUT (gzipped JSON). scripts/refresh_upgrade_dump.py runs it.
  admin STATE runs the previous release's local stack for its operator surface alone (its `admin` function behind its
              loopback Lambda endpoint), with two suspended tenants, each holding more work than that release hands
              back a call, each call of the function out of time after one batch of it; writes the stack's state file
              to STATE, prints the tenants, and serves until its standard input closes.
  read DUMP   loads the tables the current release wrote (the test's dump of them) into the previous release's local
              stack (a dump without `entriesItems`, of a release with one table, loads the first alone),
              at the dump's moment, and reads everything through its API as an operator and an approver would, then
              decides one gate, claims another and, asked to, finishes every run that has not ended (gates decided,
              claims released, ModuleX runs resumed, tasks completed, deadlines fired); prints what it saw, and exits
              1 naming every request that was not answered 2xx.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

OFF = {"INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off"}  # no outbound call: notices and actions stay queued
HOUR_MS = 3_600_000
MODULEX_SCHEMA = {
    "metadata": {"name": "Refund approval", "version": "1.0.0"},
    "nodes": [
        {
            "id": "node_approval",
            "type": "interrupt",
            "name": "Approval",
            "x": 0,
            "y": 0,
            "interrupt_config": {
                "message": "Refund {{input.amount}}?",
                "resume_schema": {"type": "object", "properties": {"approved": {"type": "boolean"}}},
            },
        },
        {
            "id": "node_done",
            "type": "transformer",
            "name": "Done",
            "x": 300,
            "y": 0,
            "transformer_config": {"operations": [{"type": "template", "params": {"template": "done"}}]},
        },
    ],
    "edges": [{"source": "node_approval", "target": "node_done"}],
}


class Api:
    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.key = key
        self.failures: list[str] = []
        # Writing: the first refusal stops (the scenario is wrong for this release); reading: every one is listed.
        self.strict = False

    def call(self, method: str, path: str, body: Any = None, key: str | None = None, **headers: str) -> tuple[int, Any]:
        sent = {"Authorization": f"Bearer {key or self.key}", "Content-Type": "application/json", **headers}
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - loopback only
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as refused:
            raw = refused.read()
            try:
                return refused.code, json.loads(raw)
            except ValueError:
                return refused.code, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None, key: str | None = None, **headers: str) -> Any:
        status, answer = self.call(method, path, body, key, **headers)
        if not 200 <= status < 300:
            self.failures.append(f"{method} {path}: {status} {answer}")
            if self.strict:
                sys.exit(f"the previous release refused {method} {path}: {status} {answer}")
        return answer

    def wait_status(self, run: str, statuses: set[str], timeout_s: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.ok("GET", f"/runs/{wire(run)}")
            if (got or {}).get("status") in statuses or time.monotonic() > deadline:
                return got or {}
            time.sleep(0.1)


def wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def start_stack(work: Path, offset_s: float = 0.0) -> tuple[Any, Any]:
    os.environ.update(OFF)
    from interlude.local.stack import LocalStack

    stack = LocalStack(port=0, clock_file=work / "clock")
    info = stack.start()
    if offset_s:
        (work / "clock").write_text(repr(float(offset_s)))
    return stack, info


# -- write ---------------------------------------------------------------------------------------------------------

def gate(config: dict[str, Any], node: str = "gate", after: bool = True) -> dict[str, Any]:
    nodes = [{"id": node, "typeId": config.pop("typeId", "core.approvalGate"), "config": config}]
    edges = []
    if after:
        nodes.append({"id": "after", "typeId": "core.transform", "config": {"outputs": {"done": True}}})
        edges.append({"sourceNodeId": node, "targetNodeId": "after"})
    return {"nodes": nodes, "edges": edges}


WORKFLOWS: dict[str, dict[str, Any]] = {
    "approve": {**gate({"title": "Ship it?"}), "name": "Ship", "description": "asks anyone", "version": "1.0"},
    "approve-ops": gate({"title": "Ops ship?", "approverGroupRefs": ["ops"]}),
    "approve-timeout": gate({"title": "In an hour?", "timeoutMs": HOUR_MS, "onTimeout": "reject"}),
    "quorum": gate({"title": "Two of us?", "requiredApprovals": 2}),
    "clarify": gate({"typeId": "core.clarificationGate", "questions": [{"id": "why", "question": "Why?"}]}),
    "custom": gate({"typeId": "core.interrupt", "kind": "custom", "data": {"customKind": "acme.sign", "payload": {"doc": 1}}}),
    "external": gate(
        {"typeId": "core.interrupt", "kind": "external-event", "data": {"eventType": "paid", "correlation": {"order": "o-1"}}}
    ),
    "conversation": gate({"typeId": "core.conversationGate", "turn": "start", "title": "Talk", "prompt": "Hello?"}),
    "confidence": gate({"typeId": "core.confidenceGate", "agentId": "agent-1", "observed": 0.2, "threshold": 0.8}),
    "credential": gate(
        {"typeId": "core.credentialGate", "provider": "github", "scopes": ["repo"], "connectUrl": "https://example.com/connect"}
    ),
    "sleep": gate({"typeId": "core.delay", "delayMs": HOUR_MS}, node="nap"),
    "task": gate({"typeId": "core.task", "taskType": "summarize", "heartbeatTimeoutSeconds": 3600}, node="work"),
    # A private address: whichever release performs it refuses it at its egress guard, without a network call.
    "http": gate({"typeId": "core.http", "url": "https://10.0.0.1/hook", "body": {"x": 1}}, node="call"),
    "parent": gate({"typeId": "core.subWorkflow", "workflowId": "approve"}, node="child"),
}


def write(out: Path) -> None:
    import interlude

    work = Path(tempfile.mkdtemp(prefix="previous-release-"))
    stack, info = start_stack(work)
    api = Api(info.base_url, info.api_key)
    api.strict = True
    try:
        made = scenario(api)
        settle(api, made, stack)
        if api.failures:
            sys.exit("the previous release refused:\n" + "\n".join(api.failures))
        dump = {
            "release": interlude.__version__,
            "writtenAt": time.time(),
            "tenant": info.tenant,
            "apiKey": info.api_key,
            "made": made,
            "items": table_items(),
            **({"entriesItems": table_items(tables()[1])} if len(tables()) > 1 else {}),
            "schedules": schedules(),
            "queued": queued(),
            "secrets": secrets(),
        }
    finally:
        stack.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(json.dumps(dump, sort_keys=True).encode(), mtime=0))
    print(f"{out}: {len(dump['items'])} items, {len(dump['schedules'])} schedules, release {dump['release']}")


def scenario(api: Api) -> dict[str, Any]:
    """Every kind of run the previous release can leave in a table, by name: `runs` name -> run id."""
    ops_key = api.ok("POST", "/keys", {"subjectId": "olga", "scopes": ["approvals:respond", "runs:read"], "groups": ["ops"]})
    worker_key = api.ok("POST", "/keys", {"subjectId": "worker-1", "scopes": ["tasks:work"]})
    api.ok("PUT", "/tenant/settings", {"eventRetentionHours": 48, "limits": {"openRuns": 500}})
    api.ok("PUT", "/principals/olga", {"displayName": "Olga", "groups": ["ops"], "email": "olga@example.com"})
    for workflow_id, definition in WORKFLOWS.items():
        api.ok("PUT", f"/workflows/{workflow_id}", definition)
    runs: dict[str, str] = {}

    def start(name: str, workflow_id: str, **body: Any) -> str:
        runs[name] = api.ok("POST", "/runs", {"workflowId": workflow_id, **body})["runId"]
        return runs[name]

    for workflow_id in WORKFLOWS:
        start(workflow_id, workflow_id)
    start("run-timeout", "approve", configurable={"version": 1, "run": {"runTimeoutMs": 2 * HOUR_MS}})
    api.ok("POST", f"/runs/{wire(runs['quorum'])}/interrupts/gate", {"resumeValue": {"action": "accept"}})
    start("task-claimed", "task")
    for done, action in (("completed", "accept"), ("failed", "reject")):
        run = start(done, "approve")
        api.wait_status(run, {"waiting-approval"})
        api.ok("POST", f"/runs/{wire(run)}/interrupts/gate", {"resumeValue": {"action": action}})
    api.ok("POST", f"/runs/{wire(start('cancelled', 'approve'))}/cancel", {"reason": "not needed"})
    modulex = {"X-Organization-ID": api.ok("GET", "/tenant/settings")["tenant"]}
    created = api.ok(
        "POST",
        "/workflows",
        {"workflow_schema": MODULEX_SCHEMA, "name": "Refunds", "category": "finance", "visibility": "private"},
        **modulex,
    )
    started = api.ok("POST", "/workflows/run", {"workflow_id": created["id"], "input": {"amount": 5}}, **modulex)
    runs["modulex"] = started["run_id"].replace("~2F", "/")
    api.wait_status(runs["task-claimed"], {"running"})
    claimed = until(lambda: api.call("POST", "/tasks:claim", {"queues": ["summarize"]}, key=worker_key["apiKey"]))
    return {
        "runs": runs,
        "modulexWorkflow": created["id"],
        "opsKey": ops_key["apiKey"],
        "workerKey": worker_key["apiKey"],
        "claimedTask": claimed[1]["runId"] if claimed[0] == 200 else None,
    }


def until(attempt: Any, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = attempt()
        if got[0] == 200 or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def settle(api: Api, made: dict[str, Any], stack: Any) -> None:
    """Wait until every run is where it stays (its stream records taken by dispatch: tasks and actions made)."""
    resting = {"waiting-approval", "waiting-input", "waiting-external", "running", "completed", "failed", "cancelled"}
    for run in made["runs"].values():
        api.wait_status(run, resting)
    # The outbox's last records (schedules, tasks, queued actions) land after that. A release whose local stack has the
    # quiet barrier (0.4.0 on) is asked; an older one's dump waits until the table and the schedules read the same
    # three times over 2 s (a fixed sleep missed them on a loaded machine), at most 60 s.
    if hasattr(stack, "quiesce"):
        stack.quiesce(60)
        return
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(seen) < 3 or len(set(seen[-3:])) > 1):
        time.sleep(1)
        seen.append(json.dumps([[table_items(name) for name in tables()], schedules()], sort_keys=True))


def tables() -> tuple[str, ...]:
    """The names of the release's local tables: the first, and the second where the release has one (0.5.0 on)."""
    from interlude.local import stack

    second = getattr(stack, "ENTRIES_TABLE_NAME", None)
    return (stack.TABLE_NAME, second) if second else (stack.TABLE_NAME,)


def table_items(table: str | None = None) -> list[dict[str, Any]]:
    import boto3

    pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table or tables()[0])
    return [encoded(item) for page in pages for item in page.get("Items") or []]


def schedules() -> list[dict[str, Any]]:
    import boto3

    from interlude import wiring

    client = boto3.client("scheduler")
    found = []
    for page in client.get_paginator("list_schedules").paginate(GroupName=wiring.LOCAL_SCHEDULE_GROUP):
        for summary in page.get("Schedules") or []:
            got = client.get_schedule(Name=summary["Name"], GroupName=wiring.LOCAL_SCHEDULE_GROUP)
            found.append({"name": got["Name"], "at": got["ScheduleExpression"], "input": json.loads(got["Target"]["Input"])})
    return found


# The deployment's own secrets, by the variable that names them: the same across its releases (the audit checkpoints'
# signing key above all: a checkpoint one release signed is verified by the next with it).
SECRET_ENVS = ("KEY_RING_SECRET", "AUDIT_KEY_SECRET")


def secrets() -> dict[str, str]:
    import boto3

    client = boto3.client("secretsmanager")
    return {env: client.get_secret_value(SecretId=os.environ[env])["SecretString"] for env in SECRET_ENVS}


def restore_secrets(values: dict[str, str]) -> None:
    import boto3

    client = boto3.client("secretsmanager")
    for env, value in values.items():
        client.put_secret_value(SecretId=os.environ[env], SecretString=value)


def restore_objects(buckets: dict[str, dict[str, str]]) -> None:
    """The newer release's bucket objects (audit anchors) in place of what this stack's own start put there: a
    rollback keeps the buckets, and an anchor this stack signed before the key ring was restored verifies nothing."""
    import boto3

    s3 = boto3.client("s3")
    for env, objects in buckets.items():
        bucket = os.environ.get(env, "")
        if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:  # a release before the bucket reads none
            continue
        listed = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for key in [o["Key"] for page in listed for o in page.get("Contents", ())]:
            if key not in objects:
                s3.delete_object(Bucket=bucket, Key=key)
        for key, body in objects.items():
            s3.put_object(Bucket=bucket, Key=key, Body=base64.b64decode(body), ChecksumAlgorithm="SHA256")


def queued() -> dict[str, list[str]]:
    """The bodies of the messages waiting on each queue (delivery was off: notices, actions, notifications)."""
    import boto3

    from interlude import wiring

    sqs = boto3.client("sqs")
    found: dict[str, list[str]] = {}
    for queue in wiring.QUEUES:
        url = os.environ[queue.url_env]
        while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages"):
            found.setdefault(queue.name, []).extend(m["Body"] for m in got)
    return found


def encoded(item: dict[str, Any]) -> dict[str, Any]:
    """A low-level item as JSON: binary values base64."""
    return {name: ({"B": base64.b64encode(v["B"]).decode()} if "B" in v else v) for name, v in item.items()}


def decoded(item: dict[str, Any]) -> dict[str, Any]:
    return {name: ({"B": base64.b64decode(v["B"])} if "B" in v else v) for name, v in item.items()}


# -- read ----------------------------------------------------------------------------------------------------------

def read(dump_path: Path) -> None:
    dump = json.loads(gzip.decompress(dump_path.read_bytes()))
    work = Path(tempfile.mkdtemp(prefix="previous-release-"))
    # Its callbacks worker delivers what the newer release left to the test's receiver (on 127.0.0.1), at once.
    os.environ.update({"INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1", "INTERLUDE_CALLBACK_BACKOFF_BASE_S": "0"})
    stack, info = start_stack(work, offset_s=dump["writtenAt"] - time.time())
    api = Api(info.base_url, dump["apiKey"])
    try:
        restore_secrets(dump["secrets"])
        # This stack's functions read its own fresh secrets as it started (its seeding, its first sweep) and cache them
        # (Powertools, an hour for the audit key): a checkpoint its sweep then signed over the newer release's chains
        # would carry a key the deployment does not hold. A rollback's instances start after the secrets it keeps.
        from interlude.local.lambda_runtime import fresh_instances

        fresh_instances()
        load(dump["items"], tables()[0])
        second = dump.get("entriesItems") or []
        if second and len(tables()) < 2:
            api.failures.append(f"this release has one table: the {len(second)} items of the dump's second it cannot read")
        elif second:
            load(second, tables()[1])
        restore_objects(dump.get("objects") or {})
        seen = read_everything(api, dump, work / "clock")
    finally:
        stack.stop()
    print(json.dumps({"release": __import__("interlude").__version__, "seen": seen, "failures": api.failures}))
    sys.exit(1 if api.failures else 0)


def load(items: list[dict[str, Any]], table: str) -> None:
    import boto3

    client = boto3.client("dynamodb")
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": decoded(item)}} for item in items[start : start + 25]]
        pending = {table: batch}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def read_everything(api: Api, dump: dict[str, Any], clock_file: Path) -> dict[str, Any]:
    """Every run by id and in the listing, the inbox, the workflows, keys, settings, the directory and the audit
    trail, as the previous release answers them; then one gate of the newer release's decided here, one claimed, and
    every run finished."""
    runs = dump["made"]["runs"]
    snapshots = {name: api.ok("GET", f"/runs/{wire(run)}") for name, run in runs.items()}
    listed = api.ok("GET", "/runs?limit=100") or {}
    inbox = api.ok("GET", "/interrupts?limit=100", key=dump["made"]["opsKey"]) or {}
    modulex = {"X-Organization-ID": dump["tenant"]}
    seen = {
        "runs": {name: (snapshot or {}).get("status") for name, snapshot in snapshots.items()},
        "listed": len(listed.get("runs") or []),
        "inbox": len(inbox.get("interrupts") or []),
        # What a kind filter lists: since 0.5.0 an approval has no entry in its kind's family (ADR 0160)
        "approvals": [i["runId"] for i in (api.ok("GET", "/interrupts?kind=approval&limit=100") or {}).get("interrupts") or []],
        "workflows": len((api.ok("GET", "/workflows?page_size=100", **modulex) or {}).get("workflows") or []),
        "keys": len((api.ok("GET", "/keys?limit=100") or {}).get("keys") or []),
        "settings": (api.ok("GET", "/tenant/settings") or {}).get("settings"),
        "principal": (api.ok("GET", "/principals/olga") or {}).get("displayName"),
        "modulexRun": (api.ok("GET", f"/workflow-runs/{wire(runs['modulex'])}", **modulex) or {}).get("status"),
        "audit": api.ok("GET", "/audit/verify?fromSeq=0&toSeq=1000"),
    }
    if "new-modulex" in runs:
        # A ModuleX gate's large message, stored once since 0.4.0 (ADR 0142): its events as this release answers them
        seen["modulexEvents"] = (api.ok("GET", f"/runs/{wire(runs['new-modulex'])}/events/poll") or {}).get("events")
    decide = dump["made"].get("decideOnRollback")
    if decide:
        # Its events, the gate's long text among them (stored once since 0.4.0: ADR 0134), as this release answers them
        seen["events"] = (api.ok("GET", f"/runs/{wire(runs[decide])}/events/poll") or {}).get("events")
        decided = api.ok("POST", f"/runs/{wire(runs[decide])}/interrupts/gate", {"resumeValue": {"action": "accept"}})
        seen["decided"] = (decided or {}).get("status")
        # Its appender chains the decision's entry (after what the newer release left past that chain's head, which it
        # adopts): the trail then lists both, and verifies.
        until(lambda: (200 if decision_listed(api, runs[decide]) else 404, None))
        listed = (api.ok("GET", "/audit?limit=200") or {}).get("entries") or []
        seen["auditListed"] = [[e.get("action"), (e.get("target") or {}).get("runId")] for e in listed]
        seen["auditAfter"] = api.ok("GET", "/audit/verify?fromSeq=0&toSeq=1000")
        # Then a whole pass of its daily retention sweep over the table (the newer release's runs, their items written
        # with a provisional expiry: ADR 0133), and every run read again
        seen["swept"] = retention_sweep()
        seen["afterSweep"] = {name: (api.ok("GET", f"/runs/{wire(run)}") or {}).get("status") for name, run in runs.items()}
    if dump["made"].get("noticeRuns"):
        seen["notices"] = notices_delivered(api, runs, dump["made"]["noticeRuns"], dump["made"]["callbacksQueued"])
    claim = dump["made"].get("claimOnRollback")
    if claim:
        # A gate of the newer release claimed here: the claim puts every entry of the gate again, without an expiry
        # (0.4.0's: one in the approval kind's family too, ADR 0160); the newer release, deployed again over the table
        # as this leaves it, decides the gate
        seen["claimed"] = api.ok("POST", f"/runs/{wire(runs[claim])}/interrupts/gate/claim") is not None
        seen["table"] = table_items()
        if len(tables()) > 1:
            seen["entriesTable"] = table_items(tables()[1])
    if dump["made"].get("finishOnRollback"):
        seen["finishing"] = finish_every_run(api, dump, clock_file)
    return seen


TERMINAL = {"completed", "failed", "cancelled"}


def finish_every_run(api: Api, dump: dict[str, Any], clock_file: Path) -> dict[str, Any]:
    """Every run of the table that has not ended, finished here as the deployment's people, workers and deadlines
    would finish it: the gates a person of the newer release claimed released by them, each ModuleX run resumed on its
    face, every open gate decided (each kind with a value it takes, an external event sent for one that waits on it),
    every task completed (the one a worker of the newer release claimed with the token it was given), the action the
    older release queued taken, and every deadline (the schedules either release made) fired when its time comes. What
    each step answered, and every run's status at the end (`finished`, by name)."""
    import boto3

    from interlude import wiring
    from interlude.local.sqs_pump import QueuePump

    made = dump["made"]
    runs = made["runs"]
    done: dict[str, Any] = {"released": {}, "resumed": {}}
    for name, claimer in (made.get("releaseOnRollback") or {}).items():
        done["released"][name] = api.call("DELETE", f"/runs/{wire(runs[name])}/interrupts/gate/claim", key=claimer)[0]
    organization = {"X-Organization-ID": dump["tenant"]}
    for name in made.get("modulexRuns") or []:
        resumed = {"run_id": wire(runs[name]), "resume_value": {"approved": True}}
        done["resumed"][name] = api.call("POST", f"/workflows/resume/{wire(runs[name])}", resumed, **organization)[0]
    done["decided"] = decide_open_gates(api, dump)
    done["tasks"] = complete_tasks(api, made, made.get("claimedTaskToken"))
    # Its delivery is off (OFF): the queued action's message is taken by the actions function here.
    url = os.environ[wiring.queue("actions").url_env]
    for body in (dump.get("queued") or {}).get("actions") or []:
        boto3.client("sqs").send_message(QueueUrl=url, MessageBody=body)
    done["actions"] = QueuePump("actions", url).pump_once()
    done["deadlines"] = fire_deadlines(dump.get("schedules") or [], clock_file, api)
    # A claim whose lease lapsed meanwhile put its task back on its queue; a timed-out gate may open the next step's.
    done["tasks"] += complete_tasks(api, made)
    done["decided"] += decide_open_gates(api, dump)
    done["finished"] = {name: api.wait_status(run, TERMINAL).get("status") for name, run in runs.items()}
    return done


def decide_open_gates(api: Api, dump: dict[str, Any]) -> int:
    """Every gate an inbox lists decided, round after round (a decision may let a run reach its next gate, a child's end
    its parent's): by the ops member where theirs lists it, else by the admin (a gate another has claimed, or one the
    ops member voted on already, is left to the next); the runs left to their deadlines aside. How many decisions were
    taken."""
    keys = (dump["made"]["opsKey"], dump["apiKey"])
    left = {dump["made"]["runs"][name] for name in dump["made"].get("leftToTheirDeadlines") or []}
    decided, tried = 0, set()
    for _ in range(10):
        before = decided
        for key in keys:
            for gate in (api.ok("GET", "/interrupts?limit=100", key=key) or {}).get("interrupts") or []:
                if (gate["interruptId"], key) in tried or gate["runId"] in left:
                    continue
                tried.add((gate["interruptId"], key))
                payload = gate["payload"]
                if payload["kind"] == "external-event":
                    api.ok("POST", "/events", {**payload["data"], "payload": {"paid": True}})
                    decided += 1
                    continue
                path = f"/runs/{wire(gate['runId'])}/interrupts/{gate['nodeId']}"
                status, answer = api.call("POST", path, {"resumeValue": resume_value(payload)}, key=key)
                if status == 200:
                    decided += 1
                elif status not in (403, 409):
                    api.failures.append(f"POST {path}: {status} {answer}")
        if decided == before:
            return decided
        time.sleep(1)  # the stack's dispatch moves the runs on
    return decided


def resume_value(payload: dict[str, Any]) -> Any:
    """A value each kind of gate accepts (a credential is declined: granting needs the provider's grant)."""
    kind = payload["kind"]
    if kind in ("approval", "low-confidence"):
        return {"action": "accept"}
    if kind == "clarification":
        return dict.fromkeys(payload["resumeSchema"]["required"], "because")
    if kind == "credential":
        return {"outcome": "declined"}
    return {"approved": True}  # custom (a ModuleX interrupt too), conversation.start


def complete_tasks(api: Api, made: dict[str, Any], token: str | None = None) -> int:
    """Every task a worker may claim now completed, `token`'s first (a task a worker of the newer release claimed, with
    the token it was given); how many."""
    worker = made["workerKey"]

    def claimed() -> str | None:
        queues = made.get("taskQueues") or ["summarize"]
        status, answer = api.call("POST", "/tasks:claim", {"queues": queues}, key=worker)
        return str(answer["taskToken"]) if status == 200 else None

    done, token = 0, token or claimed()
    while token is not None:
        status, answer = api.call("POST", f"/tasks/{token}/complete", {"output": {"summary": "ok"}}, key=worker)
        if status != 200:
            api.failures.append(f"POST /tasks/{{taskToken}}/complete: {status} {answer}")
            return done
        done, token = done + 1, claimed()
    return done


def fire_deadlines(schedules: list[dict[str, Any]], clock_file: Path, api: Api) -> int:
    """Each schedule's input given to the timeouts function when its time comes, earliest first, the clock moved on to
    it (a bucket's names its second, a deadline of its own its due time); how many fired."""
    from interlude.local import lambda_runtime

    fired = 0
    for schedule in sorted(schedules, key=lambda s: s["input"].get("due", s["input"].get("dueSecond", 0))):
        due = float(schedule["input"].get("due", schedule["input"].get("dueSecond", 0)))
        if due + 1 > time.time() + float(clock_file.read_text() or 0):
            clock_file.write_text(repr(due + 1 - time.time()))
        try:
            lambda_runtime.invoke("timeouts", schedule["input"])
        except Exception as failed:  # noqa: BLE001 - every deadline is tried, each failure listed
            api.failures.append(f"the deadline {schedule['name']} failed: {failed!r}")
            continue
        fired += 1
    return fired


def notices_delivered(api: Api, runs: dict[str, str], named: dict[str, str], bodies: list[str]) -> dict[str, Any]:
    """A transition's notices the newer release made one delivery of (format 10, since 0.5.0): the dead one's attempts
    listed and its dead notice sent again by its id, the queued one's message delivered, by this release's worker
    (with what its own dispatch queued again of the loaded table's events: notices one by one, delivered beside)."""
    import boto3

    from interlude import wiring
    from interlude.local.sqs_pump import QueuePump

    def attempts(name: str) -> list[dict[str, Any]]:
        return (api.ok("GET", f"/runs/{wire(runs[name])}/deliveries") or {}).get("deliveries") or []

    dead = attempts(named["dead"])
    found: dict[str, Any] = {"listed": sorted([a["type"], a["attempt"], a["status"]] for a in dead)}
    refused = [a["noticeId"] for a in dead if a.get("final") and a["status"] != "succeeded"]
    replayed = api.ok("POST", f"/runs/{wire(runs[named['dead']])}/deliveries/{refused[0]}/retry") if refused else None
    found["replayed"] = (replayed or {}).get("status")
    # A notice the newer release dead-lettered on its message's last receive (since 0.12.0: a line without an attempt)
    given_up = attempts(named["givenUp"]) if "givenUp" in named else []
    ended = [a["noticeId"] for a in given_up if a.get("final")]
    given_up_replay = api.ok("POST", f"/runs/{wire(runs[named['givenUp']])}/deliveries/{ended[0]}/retry") if ended else None
    url = os.environ[wiring.queue("callbacks").url_env]
    for body in bodies:
        boto3.client("sqs").send_message(QueueUrl=url, MessageBody=body)
    pump = QueuePump("callbacks", url)
    for _ in range(50):
        if not pump.pump_once():
            break
    delivered = (named["dead"], named["queued"])
    found["delivered"] = {
        name: {a["type"] for a in attempts(name) if a["status"] == "succeeded"} >= {"interrupt.resolved", "run.completed"}
        for name in delivered
    }
    found["bundles"] = {name: bundle_statuses(runs[name]) for name in delivered}
    if "givenUp" in named:
        found["givenUp"] = {
            "listed": [[a["type"], a.get("attempt"), a["status"], a.get("errorClass")] for a in given_up],
            "replayed": (given_up_replay or {}).get("status"),
            "delivered": any(a["status"] == "succeeded" for a in attempts(named["givenUp"])),
        }
    return found


def bundle_statuses(run_id: str) -> list[str]:
    """The statuses of the run's delivery records of a transition's notices (their key ends in "+"), in whichever of
    the release's tables they are."""
    import boto3

    from interlude.store.layout import run_pk

    got = [
        item
        for table in tables()
        for item in boto3.client("dynamodb").query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :n)",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":n": {"S": "N#"}},
        )["Items"]
    ]
    return [item["status"]["S"] for item in got if item["sk"]["S"].endswith("+")]


def decision_listed(api: Api, run: str) -> bool:
    listed = (api.ok("GET", "/audit?limit=200") or {}).get("entries") or []
    return any(e.get("action") == "interrupt.decided" and (e.get("target") or {}).get("runId") == run for e in listed)


def retention_sweep() -> bool | None:
    """A whole pass of the release's daily retention sweep, in this process (True once whole)."""
    from interlude.migrations import sweeps
    from interlude.store.facade import Store

    # A release with two tables takes both names (its Store's), one with one table the first alone.
    return sweeps.sweep(Store(*tables()), "rollback", start=True)


# -- admin ---------------------------------------------------------------------------------------------------------

# More held pieces than one batch of the previous release's hand back (25).
HELD_PIECES = 30


def admin(state: Path) -> None:
    from interlude.domain.clock import iso, now
    from interlude.local import lambda_runtime
    from interlude.local.stack import ENTRIES_TABLE_NAME, TABLE_NAME
    from interlude.store.facade import Store
    from interlude.store.tenants import TenantRecords

    stack, info = start_stack(state.parent)

    def out_of_time_after_one_batch(context: Any) -> int:
        # The function asks its time once for its margin, then before each batch: time for the first batch alone (a
        # deployed call with more held work than it hands back before its last minute).
        asked = context.__dict__["asked"] = context.__dict__.get("asked", 0) + 1
        return 29_000 if asked <= 2 else 0

    lambda_runtime.LambdaContext.get_remaining_time_in_millis = out_of_time_after_one_batch  # type: ignore[method-assign]
    records = TenantRecords(Store(TABLE_NAME, ENTRIES_TABLE_NAME))
    tenants = ["rolled-back-1", "rolled-back-2"]
    for tenant in tenants:
        for operation in ("create", "suspend"):
            done = lambda_runtime.invoke("admin", {"operation": operation, "tenant": tenant})
            assert "error" not in done, done
        for piece in range(HELD_PIECES):
            deadline = {"runId": f"{tenant}/held-{piece:02d}", "nodeId": "gate", "kind": "deadline"}
            assert records.hold(tenant, "deadline", f"held-{piece:02d}", deadline, iso(now()))
    state.write_text(json.dumps(info.as_json()))
    print(json.dumps({"release": "previous", "tenants": tenants, "held": HELD_PIECES}), flush=True)
    sys.stdin.read()
    stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["write", "read", "admin"])
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    {"write": write, "read": read, "admin": admin}[args.mode](args.path)


if __name__ == "__main__":
    main()
