"""The queues of the stream and migrate functions (the delivery, notification and action queues are in their own
groups)."""

from __future__ import annotations

from interlude import wiring
from interlude.config.reading import EnvironmentSettings, cached, setting


class QueueSettings(EnvironmentSettings):
    # The stream function forwards every new event-log item here; dispatch takes them from it.
    outbox_url: str = setting(wiring.queue(wiring.OUTBOX_QUEUE).url_env, default="")
    # The migrate function's own queue: each message a turn of the table's migrations.
    migrations_url: str = setting(wiring.queue("migrations").url_env, default="")


queue_settings = cached(QueueSettings.from_env)
