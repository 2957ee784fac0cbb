"""Issue 16 in the synthesized template: the audit logs are append-only below the application."""

from __future__ import annotations

import re

import pytest

from interlude import wiring
from interlude.store import audit as items
from tests.infra.conftest import as_list


@pytest.mark.parametrize("spec", [f for f in wiring.FUNCTIONS if f.table_actions], ids=lambda spec: spec.name)
def test_every_role_with_the_table_is_denied_updating_or_deleting_an_audit_log_entry(synth, spec):
    # Given a function that may write the table / Then its role is denied Update and Delete on the audit logs'
    # partitions: entries can only ever be Put (issue 16, the append-only obligation of openwop-audit-log-integrity)
    (deny,) = [s for s in synth.statements(spec.name) if s.get("Effect") == "Deny"]
    # (BatchWriteItem too: its DeleteRequest would delete past a DeleteItem deny)
    assert set(as_list(deny["Action"])) == {"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    assert deny["Condition"] == {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["T#*#AUDIT#*"]}}
    # And the pattern covers every chain's log partition but neither a chain head nor any other item of the tenant
    pattern = re.compile("^" + deny["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"][0].replace("*", ".*") + "$")
    assert all(pattern.match(items.log_pk("acme", chain)) for chain in range(wiring.AUDIT_CHAINS))
    others = (items.head_pk("acme", 0), items.head_pk("acme", 127), "T#acme#R#run", "T#acme", "K#0123", "T#acme#INBOX#ANY#00")
    assert not any(pattern.match(pk) for pk in others)
