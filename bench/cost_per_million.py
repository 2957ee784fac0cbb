"""Print what one approval lifecycle costs on AWS, per million lifecycles, from measured DynamoDB item sizes.

Lifecycle: createRun, getRun, a winning resolve, one poll of the events; plus what the stream consumer does
for each event-log item. The real Service and Store run against moto in-process; each write's resulting
item sizes are measured with DynamoDB's size rules, so the figures follow the code. Prices are us-east-1
on-demand list prices (edit PRICES to compare).
Usage: .venv/bin/python bench/cost_per_million.py
"""

from __future__ import annotations

import json
import math
from decimal import Decimal

from _bench import admin_with_approval, offline_aws

offline_aws(TABLE_NAME="bench")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.app.service import Service  # noqa: E402
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
        # Index writes: the inbox's entry items (store/inbox.py), and a GSI write for any item that holds the
        # `inbox` GSI's key after a write or lost it in one (the audit head's pending-checkpoint entry): a GSI write
        # is never doubled by a transaction.
        self.index_wru = 0.0
        self.old: list[dict | None] = []
        self.read_unit = 0.5
        self.reader = reader
        # (key, factor, is a delete) per item the pending call writes.
        self.pending: list[tuple[dict, int, bool]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)

    def before(self, model, params, **_):
        name = model.name
        # A strongly consistent read is billed a whole unit per 4 KB, an eventually consistent one half.
        batch = next(iter((params.get("RequestItems") or {}).values()), {}) if name == "BatchGetItem" else {}
        self.read_unit = 1.0 if params.get("ConsistentRead") or batch.get("ConsistentRead") else 0.5
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
            if f"#{wiring.INBOX.prefix}#" in key["pk"]["S"]:
                self.index_wru += units
                continue
            self.wru += units
            if got is not None and gsi_key in got:
                self.index_wru += math.ceil(item_size(got) / 1024)
            elif old is not None and gsi_key in old:
                self.index_wru += math.ceil(item_size(old) / 1024)
        self.pending = []
        self.old = []
        unit = self.read_unit
        if name == "GetItem":
            # A read that finds nothing is billed as one unit step too.
            self.rru += unit * max(1, math.ceil(item_size(parsed.get("Item") or {}) / 4096))
        elif name == "Query":
            self.rru += unit * max(1, math.ceil(sum(item_size(i) for i in parsed.get("Items", [])) / 4096))
        elif name == "BatchGetItem":
            for items in (parsed.get("Responses") or {}).values():
                self.rru += sum(unit * math.ceil(item_size(i) / 4096) for i in items)


class Api:
    """Requests to the real API function (the local stack's Lambda runtime), each metered on its own."""

    def __init__(self) -> None:
        from interlude.api import http
        from interlude.domain.models.requests import CreateKeyRequest

        self.service = http.service()
        created = self.service.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        self.bearer = f"Bearer {created['apiKey']}"
        self.meter = Meter(self.service.store.client, boto3.client("dynamodb"))

    def call(self, method: str, path: str, body: object = None, key: str | None = None) -> tuple[dict, float, float]:
        """(answer, WRU, RRU) of one request."""
        from interlude.local import lambda_runtime
        from interlude.local.http_gateway import to_event

        headers = {"authorization": self.bearer, "content-type": "application/json"}
        if key:
            headers["idempotency-key"] = key
        raw = b"" if body is None else json.dumps(body).encode()
        self.meter.wru = self.meter.rru = self.meter.index_wru = 0.0
        got = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
        return json.loads(got["body"]), self.meter.wru + self.meter.index_wru, self.meter.rru


def main() -> None:
    from tests.support.local_stack import wire

    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, "bench")
        admin_with_approval(Service(Store("bench", client)))
        api = Api()
        meter = api.meter
        create = {"workflowId": "conformance-approval"}
        resume = {"resumeValue": {"action": "accept"}}

        # A warm instance first: the key and the workflow cached, as in steady state.
        warm = api.call("POST", "/runs", create)[0]["runId"]
        api.call("POST", f"/runs/{wire(warm)}/interrupts/gate", resume)
        meter.wru = meter.rru = meter.index_wru = 0.0
        run = api.call("POST", "/runs", create)[0]["runId"]
        first = (meter.wru, meter.index_wru, meter.rru)
        rest = [0.0, 0.0, 0.0]
        for method, path, body in (
            ("GET", f"/runs/{wire(run)}", None),
            ("POST", f"/runs/{wire(run)}/interrupts/gate", resume),
            ("GET", f"/runs/{wire(run)}/events/poll?timeout=1", None),
        ):
            api.call(method, path, body)
            rest = [rest[0] + meter.wru, rest[1] + meter.index_wru, rest[2] + meter.rru]
        meter.wru = meter.rru = meter.index_wru = 0.0
        event_items = list(
            meter.reader.query(
                TableName="bench",
                KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
                ExpressionAttributeValues={":pk": {"S": "T#bench#R#" + run.split("/", 1)[1]}, ":e": {"S": "E#"}},
            )["Items"]
        )
        for item in event_items:  # what the stream consumer does for each event-log item
            api.service.advance_run(run_id_of(item["pk"]["S"]))
        wru = first[0] + rest[0] + meter.wru
        index_wru = first[1] + rest[1] + meter.index_wru
        rru = first[2] + rest[2] + meter.rru
        # The same lifecycle with an Idempotency-Key on createRun and on the resolve.
        meter.wru = meter.rru = meter.index_wru = 0.0
        keyed = api.call("POST", "/runs", create, "bench-create-key-000000001")
        keyed_w, keyed_r = keyed[1], keyed[2]
        resolved = api.call("POST", f"/runs/{wire(keyed[0]['runId'])}/interrupts/gate", resume, "bench-resolve-key-00000001")
        plain_resolve = api.call("POST", f"/runs/{wire(api.call('POST', '/runs', create)[0]['runId'])}/interrupts/gate", resume)
        idem_wru = keyed_w - (first[0] + first[1]) + resolved[1] - plain_resolve[1]
        idem_rru = keyed_r - first[2] + resolved[2] - plain_resolve[2]

    api_requests = 4
    dispatch_invocations = len(event_items)
    invocations = api_requests + dispatch_invocations
    dynamo = (wru + index_wru) * PRICES["write_request_unit"] + rru * PRICES["read_request_unit"]
    gateway = api_requests * PRICES["http_api_request"]
    lam = invocations * (
        PRICES["lambda_request"] + LAMBDA_MEMORY_GB * ASSUMED_WARM_MS / 1000 * PRICES["lambda_gb_second_arm"]
    )
    per_million = 1e6
    print("One approval lifecycle through the API function (create, get, resolve, poll; key checks and the request counter included; stream consumer per event item):")
    print(
        f"  DynamoDB write request units  {wru:6.1f}   -> ${wru * PRICES['write_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  index write units             {index_wru:6.1f}   -> ${index_wru * PRICES['write_request_unit'] * per_million:8.2f} per million lifecycles"
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
    idem = idem_wru * PRICES["write_request_unit"] + idem_rru * PRICES["read_request_unit"]
    print(
        f"  + Idempotency-Key on create and resolve: {idem_wru:.1f} WRU, {idem_rru:.1f} RRU -> ${idem * per_million:.2f} "
        f"per million more (${total + idem * per_million:.2f} with it; bench/idempotency_calls.py has each request)"
    )
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
