"""The operator CLI against the local stack, as an operator in their second year reads it (a hostile pass: see
tests/integration/test_ops_probe.py for the rest): what `interlude tenants` reports and what a tenant's own audit list
says the operator did, in words."""

from __future__ import annotations

import json
import re
import uuid

from interlude.app.tenant_lifecycle import OPERATOR
from interlude.domain.audit_words import SURFACES
from tests.support.local_stack import cli


def test_a_deletion_report_shows_every_count_it_holds_and_the_tenants_audit_says_what_the_operator_did(
    stack_info: dict[str, str],
) -> None:
    name = f"ops-{uuid.uuid4().hex[:8]}"
    created = cli(stack_info, "tenants", "create", name, "--local").stdout
    found = re.search(r"\(shown once\): (\S+)", created)
    assert found, created
    key = found.group(1)
    cli(stack_info, "tenants", "suspend", name, "--local", "--reason", "unpaid invoice")
    cli(stack_info, "tenants", "resume", name, "--local")
    # The tenant's own audit list says what the operator did, and where, as it says what a key holder did
    listed = cli(stack_info, "audit", "list", "--key", key).stdout
    suspended = next(line for line in listed.splitlines() if "Suspended the tenant" in line)
    assert f"{OPERATOR['subjectId']} {SURFACES[OPERATOR['surface']]}" in suspended
    # While its deletion has not finished (one call made, waiting for work under way to end), the listing says so in
    # words, and which command goes on with it
    cli(stack_info, "tenants", "suspend", name, "--local")
    cli(stack_info, "tenants", "delete", name, "--local", "--no-wait")
    listed = cli(stack_info, "tenants", "list", "--local", "--after", name[:-1], "--limit", "1").stdout
    assert re.search(rf"^{name}\s+being deleted\s", listed, re.MULTILINE), listed
    assert f"{name}: its deletion has not finished, waiting for work already under way to end" in listed
    assert f"`interlude tenants delete {name}` goes on from there" in listed
    # When it is deleted, the report shows every count the deletion made, each in words
    shown = cli(stack_info, "tenants", "delete", name, "--local").stdout
    report = json.loads(cli(stack_info, "tenants", "delete", name, "--local", "--json").stdout)["report"]
    counted = {
        "items deleted": "items",
        "of which API keys": "apiKeys",
        "secrets deleted": "secrets",
        "schedules deleted": "schedules",
        "live connections closed": "liveConnections",
        "passes over the table": "passes",
        "items read in them": "itemsRead",
    }
    assert {field for field, value in report.items() if isinstance(value, int)} == set(counted.values())
    for words, field in counted.items():
        assert re.search(rf"^\s+{words}\s+{report[field]}$", shown, re.MULTILINE), (words, shown)
