"""A moment as a person reads it, in their time zone with UTC beside it: one wording for the approval page, the
e-mail and the Slack message, so the mail and the page its link opens show the same time the same way."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def spoken(moment: datetime | str, time_zone: str | None = None) -> str:
    """"Tue 1 Dec 2026, 14:05 (Europe/Paris) · 13:05 UTC"; in UTC alone when the zone is unknown or is UTC."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    utc = moment.astimezone(UTC)
    zone = zone_named(time_zone)
    if zone is None:
        return f"{_day(utc)}, {utc:%H:%M} UTC"
    local = utc.astimezone(zone)
    return f"{_day(local)}, {local:%H:%M} ({time_zone}) · {utc:%H:%M} UTC"


def _day(moment: datetime) -> str:
    return f"{moment:%a} {moment.day} {moment:%b %Y}"


def zone_named(name: str | None) -> ZoneInfo | None:
    """The IANA zone `name` names; None for UTC itself and for a name that is no zone."""
    if not name or name in ("UTC", "Etc/UTC"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
