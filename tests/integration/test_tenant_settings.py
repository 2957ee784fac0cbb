"""PATCH /tenant/settings through the real api handler over moto (issue 29, item 5): a patch is merged onto what it
read and written only if nobody changed the settings in between, so two concurrent patches never lose one; one that
keeps losing is a 503 to retry; and what a later release stored outlives a patch of this one."""

from __future__ import annotations

from typing import Any

import pytest

from interlude.app import tenant_facts, tenants
from interlude.domain.models.tenants import TenantSettings
from interlude.store import attributes as a
from interlude.store.interactions import InteractionStore, SettingsRead
from tests.integration.conftest import new_api_key
from tests.integration.test_forward_compatibility import http, item, set_attributes

MERGE_PATCH = {"content-type": "application/merge-patch+json"}


def another_change_after_each_read(monkeypatch: pytest.MonkeyPatch, services, tenant: str, times: int) -> list[int]:
    """Between the patch's read and its write, another writer changes the settings (`times` times: once per read)."""
    read = InteractionStore.read_settings
    changed: list[int] = []

    def read_then_changed(store: InteractionStore, of: str, *, consistent: bool = False) -> SettingsRead:
        got = read(store, of, consistent=consistent)
        if consistent and len(changed) < times:
            changed.append(1)
            rival = TenantSettings.model_validate({**(got.settings or {}), "remindersMs": [1000 * (len(changed) + 1)]})
            services.tenants.put_settings(tenant, rival, "rival")
        return got

    monkeypatch.setattr(InteractionStore, "read_settings", read_then_changed)
    return changed


def test_a_patch_is_merged_again_onto_a_change_that_landed_after_its_read(services, tenant, monkeypatch) -> None:
    key = new_api_key(services)
    assert http("PUT", "/tenant/settings", key, {"eventRetentionHours": 48})[0] == 200
    changed = another_change_after_each_read(monkeypatch, services, tenant, times=1)

    status, answer = http("PATCH", "/tenant/settings", key, {"allowDelegation": True}, **MERGE_PATCH)

    assert status == 200
    assert changed == [1]
    # Both changes are kept: the rival's reminders and the patch's delegation, over the settings before them.
    assert answer["settings"] == {
        "overridePrincipals": [],
        "eventRetentionHours": 48,
        "limits": {},
        "remindersMs": [2000],
        "allowDelegation": True,
    }
    assert tenant_facts.tenant_settings(services.interactions, tenant).model_dump(exclude_none=True) == answer["settings"]


def test_a_patch_that_keeps_losing_its_race_is_503_runner_unavailable(services, tenant, monkeypatch) -> None:
    key = new_api_key(services)
    another_change_after_each_read(monkeypatch, services, tenant, times=tenants.PATCH_ATTEMPTS)

    status, answer = http("PATCH", "/tenant/settings", key, {"allowDelegation": True}, **MERGE_PATCH)

    assert (status, answer["error"]) == (503, "runner_unavailable")
    assert "retry" in answer["message"]
    assert tenant_facts.tenant_settings(services.interactions, tenant).allowDelegation is None


def test_a_patch_keeps_what_a_later_release_stored(services, tenant) -> None:
    key = new_api_key(services)
    assert http("PUT", "/tenant/settings", key, {"limits": {"openRuns": 50}})[0] == 200
    settings_key = (f"T#{tenant}", "SETTINGS")
    stored: dict[str, Any] = a.unpacked(item(*settings_key)["settings"])
    stored["archiveAfterDays"] = 90
    stored["limits"]["retainedBytes"] = 10**9
    set_attributes(*settings_key, settings=a.as_json(stored))

    status, answer = http("PATCH", "/tenant/settings", key, {"limits": {"openRuns": None}, "allowDelegation": True}, **MERGE_PATCH)

    assert status == 200
    assert answer["settings"]["limits"] == {}
    assert "archiveAfterDays" not in answer["settings"]
    kept = a.unpacked(item(*settings_key)["settings"])
    assert (kept["archiveAfterDays"], kept["limits"], kept["allowDelegation"]) == (90, {"retainedBytes": 10**9}, True)
    # A patch naming a field this release does not know is refused, though the stored settings hold one.
    status, refused = http("PATCH", "/tenant/settings", key, {"archiveAfterDays": 30}, **MERGE_PATCH)
    assert (status, refused["error"]) == (400, "validation_error")
