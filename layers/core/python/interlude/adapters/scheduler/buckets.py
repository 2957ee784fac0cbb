"""A bucket schedule's input (ADR 0132): the second and shard of the due index (interlude.store.due_index) whose
deadlines its invocation fires, in format 8. Apart from the Scheduler adapter so `timeouts` tells a bucket's input
from a deadline's without loading the engine at its cold start."""

from __future__ import annotations

from typing import Any

from interlude.domain.formats import DEADLINE_BUCKETS, FORMAT_FIELD

DUE_SECOND = "dueSecond"
SHARD = "shard"


def bucket_input(second: int, shard: int) -> dict[str, Any]:
    return {FORMAT_FIELD: DEADLINE_BUCKETS, DUE_SECOND: second, SHARD: shard}
