"""Issue 30 item 6 on the local stack: the operator's `interlude tenants --local` invokes the stack's `admin` function
through its Lambda endpoint (as `--stack NAME` invokes a deployed one) to create a tenant with its first admin key, list
it with its usage, suspend it (its requests refused), resume it (its waiting run decidable) and delete it."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime

from tests.e2e.test_cli_operator import one_line_refusal
from tests.support.local_stack import Api, cli, quiesce, until, wire


def test_the_operator_creates_lists_suspends_resumes_and_deletes_a_tenant(stack_info: dict[str, str]) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    # create: the first admin key, shown once
    created = cli(stack_info, "tenants", "create", name, "--local").stdout
    found = re.search(r"\(shown once\): (\S+)", created)
    assert found, created
    tenant = Api(stack_info["baseUrl"], found.group(1), name)
    run_id = tenant.start(tenant.fixture("conformance-approval"))["runId"]
    waiting = tenant.wait_status(run_id, {"waiting-approval"})
    assert waiting["status"] == "waiting-approval"
    # The month its lifecycle is billed to (the stack's clock is this machine's: the shared stack never moves it).
    month = waiting["startedAt"][:7]

    # list: a table of tenants with this month's usage, in words a person reads
    def listed_with_its_run() -> str | None:
        shown = cli(stack_info, "tenants", "list", "--local").stdout
        row = next((line for line in shown.splitlines() if line.startswith(name)), "")
        # Its run is this month's while the month it started in lasts; a month's end since lists none.
        runs = [["1"]] if datetime.now(UTC).strftime("%Y-%m") == month else [["0"], ["1"]]
        return shown if row.split()[1:2] == ["active"] and row.split()[3:4] in runs else None

    quiesce(stack_info)  # the run's usage counted: listed at the first try, not polled for with a command each time
    table = until(listed_with_its_run, 30)
    assert table.splitlines()[0].split() == [
        "TENANT", "STATUS", "SINCE", "RUNS", "STARTED", "DECISIONS", "NOTIFICATIONS", "HISTORY", "WRITTEN"
    ]
    # an active tenant is not deleted: the refusal is one line
    assert "suspend it first" in one_line_refusal(cli(stack_info, "tenants", "delete", name, "--local", check=False))
    # suspend: every request of the tenant is refused (within the instances' status cache period)
    assert "is suspended" in cli(stack_info, "tenants", "suspend", name, "--local", "--reason", "unpaid").stdout
    # (A refused response is falsy: the error body is what `until` waits for.)
    refused = until(lambda: (got := tenant.call("GET", "/runs")).status_code == 403 and got.json(), 30)
    assert refused["error"] == "interlude.tenant_suspended"
    # resume: its run waits where it was and is decidable again (on every API instance once its status cache period
    # is over: until then an instance may still refuse, doing nothing)
    assert "is active" in cli(stack_info, "tenants", "resume", name, "--local").stdout
    assert until(lambda: tenant.resolve(run_id, "gate", {"action": "accept"}).status_code == 200, 30)

    def completed() -> bool:
        got = tenant.call("GET", f"/runs/{wire(run_id)}")
        return got.ok and got.json()["status"] == "completed"

    assert until(completed, 30)
    # usage: the month's document
    usage = json.loads(cli(stack_info, "tenants", "usage", name, "--local", "--month", month, "--json").stdout)
    assert usage["tenant"] == name
    assert usage["lifecycles"] == 1
    # delete: the job goes on until it is done, then the report
    cli(stack_info, "tenants", "suspend", name, "--local")
    report = cli(stack_info, "tenants", "delete", name, "--local").stdout
    assert f"tenant {name} is deleted" in report
    assert re.search(r"of which API keys\s+1\b", report), report
    # its key is refused at once (an instance that read it within its key cache period refuses the suspended tenant),
    # and is one no one knows once that period is over
    assert tenant.call("GET", "/runs").status_code in (401, 403)
    assert until(lambda: tenant.call("GET", "/runs").status_code == 401, 30)
