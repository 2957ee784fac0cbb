"""Where deadline schedules go and what they invoke (the managers' environment, in wiring.SCHEDULES' order)."""

from __future__ import annotations

from interlude import wiring
from interlude.config.reading import EnvironmentSettings, cached, setting

_GROUP, _TARGET, _ROLE, _DEAD_LETTERS = wiring.SCHEDULES.environment


class SchedulerSettings(EnvironmentSettings):
    group: str = setting(_GROUP, default="")
    target_arn: str = setting(_TARGET, default="")
    role_arn: str = setting(_ROLE, default="")
    dead_letter_arn: str = setting(_DEAD_LETTERS, default="")


def _configured() -> SchedulerSettings | None:
    """None when the deployment has no scheduler (deadlines then hold through reads and resolves only)."""
    read = SchedulerSettings.from_env()
    return read if all(vars(read).values()) else None


scheduler_settings = cached(_configured)
