"""Settings that do not surprise (issue 29, item 5), over HTTP against the local stack: PATCH /tenant/settings
merges a JSON merge patch (RFC 7396) and PUT replaces whole, each answering what it replaced; a bad patch is a
400 (or 415) in the OpenWOP envelope with nothing stored; reading the settings, by the API or the CLI, writes
nothing to the audit log."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import requests

from tests.e2e.test_keys_and_limits import error_of
from tests.support.local_stack import Api, cli, tenant_admin_key

MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
SET = {"overridePrincipals": ["ops"], "eventRetentionHours": 48, "limits": {"openRuns": 50}}
DEFAULTS = {"overridePrincipals": [], "eventRetentionHours": 24, "limits": {}}


@pytest.fixture
def tenant(stack_info: dict[str, str]) -> Api:
    name = f"settings-{uuid.uuid4().hex[:6]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)


def patch(api: Api, body: Any, **headers: str) -> requests.Response:
    return api.call("PATCH", "/tenant/settings", body, **{**MERGE_PATCH, **headers})


def settings_of(api: Api) -> dict[str, Any]:
    got = api.call("GET", "/tenant/settings")
    assert got.status_code == 200, got.text
    settings: dict[str, Any] = got.json()["settings"]
    return settings


def audit_actions(api: Api) -> list[str]:
    return [e["action"] for e in api.call("GET", "/audit?limit=100").json()["entries"]]


def test_patch_changes_only_what_it_names_and_null_takes_a_field_back_to_its_default(tenant: Api) -> None:
    assert tenant.call("PUT", "/tenant/settings", SET).status_code == 200

    changed = patch(tenant, {"allowDelegation": True})
    assert changed.status_code == 200, changed.text
    assert changed.json()["settings"] == {**SET, "allowDelegation": True}
    assert changed.json()["previous"] == SET
    assert settings_of(tenant) == {**SET, "allowDelegation": True}

    # Nested documents merge member by member; null removes a member, so it reads as its default again.
    reset = patch(tenant, {"limits": {"openRuns": None, "requestsPerSecond": 10}, "eventRetentionHours": None})
    assert reset.json()["settings"] == {**SET, "allowDelegation": True, "eventRetentionHours": 24, "limits": {"requestsPerSecond": 10}}
    assert settings_of(tenant)["limits"] == {"requestsPerSecond": 10}
    # Plain application/json is taken as a merge patch too.
    assert tenant.call("PATCH", "/tenant/settings", {"allowDelegation": None}).json()["settings"].get("allowDelegation") is None


def test_put_replaces_whole_and_its_answer_shows_what_it_replaced(tenant: Api) -> None:
    assert tenant.call("PUT", "/tenant/settings", SET).status_code == 200

    replaced = tenant.call("PUT", "/tenant/settings", {"allowDelegation": True})
    assert replaced.status_code == 200
    # The fields left out took their defaults, and the caller sees what they were.
    assert replaced.json()["settings"] == {**DEFAULTS, "allowDelegation": True}
    assert replaced.json()["previous"] == SET


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ([{"op": "replace", "path": "/allowDelegation", "value": True}], {}, 400, "validation_error"),  # not an object
        ("true", {}, 400, "validation_error"),
        ('{"allowDelegation": tru', {}, 400, "validation_error"),  # not JSON
        ({"eventRetentionHours": 0}, {}, 400, "validation_error"),  # the result is checked as a PUT's body is
        ({"limits": {"openRuns": "many"}}, {}, 400, "validation_error"),
        ({"allowDelegation": True, "colour": "blue"}, {}, 400, "validation_error"),  # a field no settings have
        ({"allowDelegation": True}, {"Content-Type": "application/json-patch+json"}, 415, "unsupported_media_type"),
        ({"allowDelegation": True}, {"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
    ],
)
def test_a_bad_merge_patch_is_refused_in_the_envelope_and_nothing_is_stored(
    tenant: Api, body: Any, headers: dict[str, str], status: int, code: str
) -> None:
    assert tenant.call("PUT", "/tenant/settings", SET).status_code == 200
    refused = error_of(patch(tenant, body, **headers), status, code)
    assert set(refused) <= {"error", "message", "details"}
    assert refused["message"]
    assert settings_of(tenant) == SET


def test_a_bad_value_is_named_by_its_field(tenant: Api) -> None:
    refused = error_of(patch(tenant, {"limits": {"openRuns": 0}}), 400, "validation_error")
    assert [e["path"] for e in refused["details"]["errors"]] == ["limits/openRuns"]


def test_reading_the_settings_writes_nothing_to_the_audit_log(tenant: Api, stack_info: dict[str, str]) -> None:
    assert tenant.call("PUT", "/tenant/settings", {"eventRetentionHours": 72}).status_code == 200
    before = audit_actions(tenant)
    assert before.count("settings.changed") == 1

    settings_of(tenant)
    shown = json.loads(cli(stack_info, "tenant", "settings", "--local", "--tenant", tenant.tenant).stdout)
    assert shown == {"tenant": tenant.tenant, "settings": {**DEFAULTS, "eventRetentionHours": 72}}
    assert audit_actions(tenant) == before
    # A change that changes nothing is no change either.
    assert patch(tenant, {"eventRetentionHours": 72}).json()["settings"]["eventRetentionHours"] == 72
    assert tenant.call("PUT", "/tenant/settings", {"eventRetentionHours": 72}).status_code == 200
    assert audit_actions(tenant) == before

    # The CLI with an option changes that setting only, as PATCH does.
    cli(stack_info, "tenant", "settings", "--local", "--tenant", tenant.tenant, "--override-principals", "ops")
    assert settings_of(tenant) == {**DEFAULTS, "eventRetentionHours": 72, "overridePrincipals": ["ops"]}
    assert audit_actions(tenant) == ["settings.changed", *before]


def test_patch_needs_keys_admin(tenant: Api) -> None:
    reader = tenant.call("POST", "/keys", {"subjectId": "reader", "scopes": ["runs:read"]}).json()["apiKey"]
    error_of(tenant.call("PATCH", "/tenant/settings", {"allowDelegation": True}, key=reader), 403, "forbidden")
