"""Print what the API function's first lifecycle on a new instance costs beyond the same lifecycle on a warm one.

`bench/cold_import.py` times the handler's import; whatever an instance leaves to first use (route modules, answer
models, pydantic validators, caches) is paid by its first requests instead, and that is what this prints. Each round
is a fresh interpreter: moto in-process, the table and an admin key made first (untimed), the real handler imported
(untimed), then one lifecycle through `lambda_handler` — PUT /workflows/{id}, POST /runs, GET /runs/{runId},
GET /interrupts, POST /runs/{runId}/interrupts/gate — and the same lifecycle again (a new workflow id and run). Per
request: the first's CPU, the second's, and the difference (medians over the rounds); moto's work is in both, so the
difference is what the instance paid once. Given other repository roots (`main`'s worktree, say), the rounds alternate
between them, so a change's first-use cost is compared in the same minutes.
Usage: .venv/bin/python bench/first_requests.py [rounds] [other repository roots...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _bench import first_and_warm_rounds, print_paid_once

ROOT = Path(__file__).resolve().parent.parent
PROBE = r"""
import importlib.util, json, os, sys, time, types, uuid
from urllib.parse import quote
root = sys.argv[1]
os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                  TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")
os.environ.pop("AWS_ENDPOINT_URL", None)
from moto import mock_aws
mock_aws().start()
import boto3
from interlude import wiring
from interlude.composition import Services
from interlude.domain.models.requests import CreateKeyRequest
from interlude.local import moto_patches
from interlude.store.facade import Store
from interlude.store.provisioning import create_tables
moto_patches.apply()
client = boto3.client("dynamodb")
create_tables(client, "bench")
key = Services(Store("bench", "bench-entries", client)).keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
definition = json.loads(open(os.path.join(root, "tests/fixtures/openwop/conformance-approval.json")).read())
spec = importlib.util.spec_from_file_location("handler", os.path.join(root, "functions/api/handler.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
context = types.SimpleNamespace(function_name="interlude-api", memory_limit_in_mb=512, aws_request_id="r",
                                invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:interlude-api")

def call(method, path, body=None, query=""):
    headers = {"authorization": f"Bearer {key['apiKey']}", "content-type": "application/json", "host": "bench"}
    event = {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query, "headers": headers,
             "requestContext": {"accountId": "123456789012", "apiId": "bench", "domainName": "bench",
                                "requestId": str(uuid.uuid4()), "routeKey": "$default", "stage": "$default",
                                "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                                         "sourceIp": "127.0.0.1", "userAgent": "bench"}},
             "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False}
    t0 = time.process_time()
    answer = module.lambda_handler(event, context)
    spent = time.process_time() - t0
    assert answer["statusCode"] < 300, (method, path, answer)
    return json.loads(answer["body"]) if answer.get("body") else None, spent

def lifecycle(n):
    workflow_id = f"approval-{n}"
    spent = {}
    _, spent["PUT /workflows/{id}"] = call("PUT", f"/workflows/{workflow_id}", {**definition, "id": workflow_id})
    created, spent["POST /runs"] = call("POST", "/runs", {"workflowId": workflow_id})
    run_id = quote(created["runId"], safe="")  # a tenant-bound id holds a "/"
    _, spent["GET /runs/{runId}"] = call("GET", f"/runs/{run_id}")
    _, spent["GET /interrupts"] = call("GET", "/interrupts", query="limit=10")
    _, spent["POST resolve"] = call("POST", f"/runs/{run_id}/interrupts/gate", {"resumeValue": {"action": "accept"}})
    return spent

print(json.dumps([lifecycle(1), lifecycle(2)]))
"""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    roots = [ROOT, *(Path(p).resolve() for p in sys.argv[2:])]
    print_paid_once(first_and_warm_rounds(PROBE, roots, rounds), "lifecycle", whole="whole lifecycle")


if __name__ == "__main__":
    main()
