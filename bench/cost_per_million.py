"""Print what one approval lifecycle costs on AWS, per million lifecycles, from measured DynamoDB item sizes.

Lifecycle: createRun, getRun, a winning resolve, one poll of the events; plus what the stream consumer does
for each event-log item. The real Service and Store run against moto in-process; each write's resulting
item sizes are measured with DynamoDB's size rules, so the figures follow the code. Prices are us-east-1
on-demand list prices (edit PRICES to compare).
Usage: .venv/bin/python bench/cost_per_million.py
"""

from __future__ import annotations

import math
from decimal import Decimal

from _bench import admin_with_approval, offline_aws

offline_aws(TABLE_NAME="bench")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.app.service import Service  # noqa: E402
from interlude.domain.models.requests import CreateRunRequest  # noqa: E402
from interlude.store import Store, create_table  # noqa: E402
from interlude.store.dynamo import run_id_of  # noqa: E402

PRICES = {
    "write_request_unit": 0.625 / 1e6,  # DynamoDB on-demand WRU
    "read_request_unit": 0.125 / 1e6,  # DynamoDB on-demand RRU
    "http_api_request": 1.00 / 1e6,  # API Gateway HTTP API, first 300 M
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm": 0.0000133334,
    "sfn_standard_transition": 0.025 / 1000,  # Step Functions Standard, per state transition
    "sfn_express_request": 1.00 / 1e6,  # Step Functions Express, per request (plus duration)
    "sfn_express_gb_second": 0.00001667,  # Express duration, first 1,000 h per month, 64 MB billed minimum
}
# The same lifecycle as a Standard state machine: a Task with .waitForTaskToken that hands the token to the
# approver, a Choice on the decision, Succeed: one billed transition per state executed.
SFN_STANDARD_TRANSITIONS = 3
LAMBDA_MEMORY_GB = 0.5
ASSUMED_WARM_MS = 40  # per invocation; measure in your account and edit


def attr_size(value: dict) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = len(str(Decimal(v)).replace("-", "").replace(".", "").lstrip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attr_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(attr_size(x) + 1 for x in v)
    if kind == "B":
        return len(v)
    if kind == "BOOL" or kind == "NULL":
        return 1
    return len(str(v))


def item_size(item: dict) -> int:
    return sum(len(k.encode()) + attr_size(v) for k, v in item.items())


class Meter:
    """Write and read units of every DynamoDB call, from the items' sizes before and after each write."""

    def __init__(self, client, reader) -> None:
        self.wru = 0.0
        self.rru = 0.0
        # The inbox index's writes (its entry items, store/inbox.py; and a GSI write for any item that holds the
        # `inbox` GSI's key after a write or lost it in one: a GSI write is never doubled by a transaction).
        self.index_wru = 0.0
        self.old: list[dict | None] = []
        self.reader = reader
        # (key, factor, is a delete) per item the pending call writes.
        self.pending: list[tuple[dict, int, bool]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)

    def before(self, model, params, **_):
        name = model.name
        if name == "TransactWriteItems":
            for op in params["TransactItems"]:
                kind, body = next(iter(op.items()))
                key = body.get("Key") or {k: body["Item"][k] for k in ("pk", "sk")}
                self.pending.append((key, 2, kind == "Delete"))
        elif name in ("PutItem", "UpdateItem", "DeleteItem"):
            key = params.get("Key") or {k: params["Item"][k] for k in ("pk", "sk")}
            self.pending.append((key, 1, name == "DeleteItem"))
        elif name == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        self.pending.append(({k: item[k] for k in ("pk", "sk")}, 1, False))
                    else:
                        self.pending.append((request["DeleteRequest"]["Key"], 1, True))
        self.old = [self.reader.get_item(TableName="bench", Key=key).get("Item") for key, _, _ in self.pending]

    def after(self, model, parsed, **_):
        name = model.name
        gsi_key = wiring.INBOX_INDEX.partition_key
        for (key, factor, deleted), old in zip(self.pending, self.old, strict=True):
            got = self.reader.get_item(TableName="bench", Key=key).get("Item")
            # A delete is billed by the size of the item it removed; any other write by the item it leaves.
            billed = old if deleted else got
            units = factor * math.ceil(item_size(billed or key) / 1024)
            if f"#{wiring.INBOX.name}#" in key["pk"]["S"]:
                self.index_wru += units
                continue
            self.wru += units
            if got is not None and gsi_key in got:
                self.index_wru += math.ceil(item_size(got) / 1024)
            elif old is not None and gsi_key in old:
                self.index_wru += math.ceil(item_size(old) / 1024)
        self.pending = []
        self.old = []
        if name == "GetItem" and "Item" in parsed:
            self.rru += 0.5 * math.ceil(item_size(parsed["Item"]) / 4096)
        elif name == "Query":
            self.rru += 0.5 * max(1, math.ceil(sum(item_size(i) for i in parsed.get("Items", [])) / 4096))
        elif name == "BatchGetItem":
            for items in (parsed.get("Responses") or {}).values():
                self.rru += sum(0.5 * math.ceil(item_size(i) / 4096) for i in items)


def main() -> None:
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, "bench")
        service = Service(Store("bench", client))
        principal, _bearer, workflow_id = admin_with_approval(service)
        meter = Meter(client, boto3.client("dynamodb"))

        run = service.create_run(principal, CreateRunRequest.model_validate({"workflowId": workflow_id}))
        service.load_run(principal.tenant, run.runId)
        service.resolve_interrupt(principal, run.runId, "gate", {"action": "accept"})
        service.poll_events(principal, run.runId, -1, 0)
        event_items = list(
            meter.reader.query(
                TableName="bench",
                KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
                ExpressionAttributeValues={":pk": {"S": "T#bench#R#" + run.runId.split("/", 1)[1]}, ":e": {"S": "E#"}},
            )["Items"]
        )
        for item in event_items:  # what the stream consumer does for each event-log item
            service.advance_run(run_id_of(item["pk"]["S"]))
        rru, wru, index_wru = meter.rru, meter.wru, meter.index_wru

    api_requests = 4
    dispatch_invocations = len(event_items)
    invocations = api_requests + dispatch_invocations
    dynamo = (wru + index_wru) * PRICES["write_request_unit"] + rru * PRICES["read_request_unit"]
    gateway = api_requests * PRICES["http_api_request"]
    lam = invocations * (
        PRICES["lambda_request"] + LAMBDA_MEMORY_GB * ASSUMED_WARM_MS / 1000 * PRICES["lambda_gb_second_arm"]
    )
    per_million = 1e6
    print("One approval lifecycle (create, get, resolve, poll; stream consumer per event item):")
    print(
        f"  DynamoDB write request units  {wru:6.1f}   -> ${wru * PRICES['write_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  inbox index write units       {index_wru:6.1f}   -> ${index_wru * PRICES['write_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  DynamoDB read request units   {rru:6.1f}   -> ${rru * PRICES['read_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  API Gateway HTTP requests     {api_requests:6d}   -> ${gateway * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  Lambda invocations            {invocations:6d}   -> ${lam * per_million:8.2f} per million lifecycles "
        f"({LAMBDA_MEMORY_GB} GB, {ASSUMED_WARM_MS} ms assumed each)"
    )
    print(f"  event-log items written       {len(event_items):6d}")
    total = (dynamo + gateway + lam) * per_million
    print(f"  total                                  ${total:8.2f} per million lifecycles   (goal ≤ $8.00)")
    print("  (Idempotency-Key records, when the header is sent, are not in this lifecycle: see bench/idempotency_calls.py)")
    standard = SFN_STANDARD_TRANSITIONS * PRICES["sfn_standard_transition"] * per_million
    print("The same lifecycle on Step Functions, list prices, the state machine alone:")
    print(
        f"  Standard: {SFN_STANDARD_TRANSITIONS} state transitions        ${standard:8.2f} per million lifecycles "
        "(+ whatever receives the token and calls SendTaskSuccess: an API and a function, as above)"
    )
    express_one_minute = PRICES["sfn_express_request"] + 0.0625 * 60 * PRICES["sfn_express_gb_second"]
    print(
        f"  Express:  not applicable             (≤ 5 minutes per execution and no .waitForTaskToken; "
        f"even a 1-minute wait would be ${express_one_minute * per_million:.2f} per million)"
    )


if __name__ == "__main__":
    main()
