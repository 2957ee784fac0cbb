"""A tenant of its own for walking the console's forms (tests/e2e/test_console_scopes.py, test_repeated_form_fields.py):
the runs, dead letters and keys a form acts on, every item a form may change (read by Query), and what each console
form posts to act."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from interlude import wiring
from interlude.local.stack import ENTRIES_TABLE_NAME, TABLE_NAME
from interlude.store.audit import chain_of_member, head_pk, log_pk
from interlude.store.effects import LEDGER_SK_PREFIX, effect_pk
from interlude.store.inbox import Entry
from interlude.store.layout import INTERRUPT_SK_PREFIX, keys_index_pk, run_pk
from interlude.store.limits import MAX_SHARDS, usage_key
from interlude.store.retention import RETAINED
from interlude.store.table import batch_get
from tests.support.console import REFUSED_AT_THE_CALL, Console, gate_workflow
from tests.support.dead_letters import dead_letter_behind_the_api, dead_notification_behind_the_api
from tests.support.local_stack import Api, quiesce, stack_client, tenant_admin_key, wire


class Tenant:
    """A tenant of its own, so that "nothing changed" can be read off its items (its runs, keys and chains, no other's)."""

    def __init__(self, stack_info: dict[str, str]) -> None:
        self.name = f"cscope-{uuid.uuid4().hex[:8]}"
        self.stack_info = stack_info
        self.api = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, self.name), self.name)
        self.dynamodb = stack_client(stack_info, "dynamodb")
        self.workflow = gate_workflow(self.api)

    @cache  # noqa: B019 - one tenant per module
    def console(self, scopes: tuple[str, ...]) -> Console:
        return Console(self.api).signed_in(self.api.new_key(list(scopes)))

    def without(self, scope: str) -> Console:
        return self.console(tuple(s for s in wiring.ALL_SCOPES if s != scope))

    def only(self, scope: str) -> Console:
        return self.console((scope,))

    def waiting_run(self) -> str:
        run_id = self.api.start(self.workflow)["runId"]
        assert self.api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
        return run_id

    def failed_action_run(self) -> str:
        """A run failed at its HTTP step: the egress guard refuses its private destination, never dialled."""
        if not hasattr(self, "refused_call"):
            self.refused_call = f"refused-{uuid.uuid4().hex[:6]}"
            assert self.api.put_workflow(self.refused_call, REFUSED_AT_THE_CALL).status_code == 201
        run_id = self.api.start(self.refused_call)["runId"]
        assert self.api.wait_status(run_id, {"failed"}, timeout_s=60)["status"] == "failed"
        return run_id

    def dead_letter(self) -> dict[str, str]:
        """The form fields naming a new dead-lettered webhook delivery of the tenant."""
        webhook_id, delivery_id = dead_letter_behind_the_api(self.stack_info, self.waiting_run())
        return {"webhookId": webhook_id, "deliveryId": delivery_id}

    def dead_notification_run(self) -> str:
        """A waiting run with a dead-lettered notification."""
        run_id = self.waiting_run()
        dead_notification_behind_the_api(self.stack_info, run_id)
        return run_id

    def items(self, path: str, form: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every item of the tenant the console form posting `form` to `path` may change, each partition read by Query,
        never by a Scan of the stack's table, which every earlier module's items make dearer (docs/testing.md; ADR
        0148): the tenant's own partition (its settings, webhooks, first usage shard), catalogue and workflows, and
        usage shards (a run created or ended moves its open-runs count); each webhook's dead letters; for each run the
        form names (in its path or fields) its items, its gates' inbox entries and its effects; the audit chains of
        those runs, of a key the path names and of the tenant; and for a form on keys, every key of the tenant (by the
        keys' index, which moto reads whole). But its request-rate counters (each request counts)."""
        tenant = f"T#{self.name}"
        own = self.partition(tenant)
        catalogue = self.partition(f"{tenant}#WFS")
        found = [*own, *catalogue]
        partitions = [f"{tenant}#W#{i['sk']['S']}" for i in catalogue]
        partitions += [f"{tenant}#WH#{i['sk']['S'].removeprefix('WH#')}" for i in own if i["sk"]["S"].startswith("WH#")]
        named = [f"{self.name}/{opaque}" for opaque in re.findall(rf"/console/runs/{re.escape(self.name)}~2F([^/]+)", path)]
        named += [form["runId"]] if "runId" in form else []
        for run in named:
            items = self.partition(run_pk(run))
            found += items
            for item in items:
                if item["sk"]["S"].startswith(INTERRUPT_SK_PREFIX):
                    partitions += [key["pk"]["S"] for key in Entry.of_item(item).index_keys()]
                elif item["sk"]["S"].startswith(LEDGER_SK_PREFIX):
                    partitions.append(effect_pk(f"{self.name}/{item['sk']['S'].removeprefix(LEDGER_SK_PREFIX)}"))
        members = [*named, *re.findall(r"/console/keys/([^/]+)/", path), self.name]
        partitions += [pk(self.name, chain) for chain in sorted({chain_of_member(m) for m in members}) for pk in (log_pk, head_pk)]
        for pk in dict.fromkeys(partitions):
            found += self.partition(pk)
        keys = [usage_key(self.name, shard) for shard in range(1, MAX_SHARDS)]
        if path.startswith("/console/keys"):
            pages = self.dynamodb.get_paginator("query").paginate(
                TableName=TABLE_NAME,
                IndexName=wiring.INBOX_INDEX.name,
                KeyConditionExpression="#gpk = :gpk",
                ExpressionAttributeNames={"#gpk": wiring.INBOX_INDEX.partition_key},
                ExpressionAttributeValues={":gpk": {"S": keys_index_pk(self.name)}},
            )
            keys += [{"pk": i["pk"], "sk": i["sk"]} for page in pages for i in page["Items"]]
        found += batch_get(self.dynamodb, TABLE_NAME, keys)
        return sorted(found, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))

    def partition(self, pk: str) -> list[dict[str, Any]]:
        """The partition's items in both tables (docs/adr/0161: the inbox entries and delivery records may be in the
        second)."""
        query = self.dynamodb.get_paginator("query").paginate
        own = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": pk}}}
        return [item for table in (TABLE_NAME, ENTRIES_TABLE_NAME) for page in query(TableName=table, **own) for item in page["Items"]]

    def settled(self, path: str, form: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The items once the stack's pumps have finished with them (the stack's quiet barrier): read any earlier, a
        pump may still move what the last request left, and the refusal checked next would be blamed for its writes."""
        quiesce(self.stack_info)
        return self.items(path, form)


def unexpiring(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items without their expiry marks: the one write the stack may still make to them behind a test's back is
    the retention turn of a run an earlier form ended (dispatch's, queued after the run's end), which a refusal
    cannot make. `settled` waits for it (the queue pump carries it); the mask stays because the stack's recurring
    sweeps run on their own period, which the quiet barrier does not wait for."""
    return [{k: v for k, v in item.items() if k not in (wiring.TTL_ATTRIBUTE, RETAINED)} for item in items]


# What each console form posts to act (path, fields but the proof), given the acting session's scopes. A console
# form added to wiring without an entry here fails tests/e2e/test_console_scopes.py::test_every_console_form_is_walked.
FormOf = Callable[[Tenant, tuple[str, ...]], tuple[str, dict[str, Any]]]
FORMS: dict[str, FormOf] = {
    "consoleDecide": lambda t, _: (f"/console/runs/{wire(t.waiting_run())}/interrupts/review", {"action": "accept"}),
    "consoleCancelRuns": lambda t, _: ("/console/runs/cancel", {"runId": t.waiting_run(), "confirm": "yes"}),
    "consoleClaim": lambda t, _: (f"/console/runs/{wire(t.waiting_run())}/interrupts/review/claim", {}),
    "consoleRelease": lambda t, _: (f"/console/runs/{wire(t.waiting_run())}/interrupts/review/release", {}),
    "consoleAssign": lambda t, _: (f"/console/runs/{wire(t.waiting_run())}/interrupts/review/assignee", {"assignee": "someone"}),
    "consoleForkRun": lambda t, _: (f"/console/runs/{wire(t.waiting_run())}/fork", {"mode": "replay"}),
    "consoleRedriveRun": lambda t, _: (f"/console/runs/{wire(t.failed_action_run())}/redrive", {}),
    "consoleStartRun": lambda t, _: (f"/console/workflows/{t.workflow}/runs", {}),
    "consoleCreateKey": lambda t, held: ("/console/keys", {"subjectId": f"made-{uuid.uuid4().hex[:6]}", "scope": held[:1]}),
    "consoleRevokeKey": lambda t, _: (f"/console/keys/{t.api.new_key(['runs:read']).split('_')[1]}/revoke", {}),
    "consoleRetryDelivery": lambda t, _: ("/console/dead-letters/retry", t.dead_letter()),
    "consoleRetryAction": lambda t, _: (f"/console/runs/{wire(t.failed_action_run())}/actions/call/retry", {}),
    # A run with none dead still records its recovery (counted, nothing to send).
    "consoleRecoverRunDeliveries": lambda t, _: (f"/console/runs/{wire(t.waiting_run())}/deliveries/recover", {}),
    "consoleRecoverRunNotifications": lambda t, _: (
        f"/console/runs/{wire(t.dead_notification_run())}/notifications/recover",
        {},
    ),
}
