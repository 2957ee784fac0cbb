"""modulex-python against a stack: a client for its tenant, the short stream bounds the listen tests run under, and
following a run's frames across the listen's bounded responses."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from modulex import Modulex

if TYPE_CHECKING:
    from tests.support.local_stack import Api

# A listen on a quiet run ends within about two seconds under these (production: 20 s hold, 0.5 s linger).
SHORT_STREAM_BOUNDS = {
    "INTERLUDE_STREAM_HOLD_SECONDS": "1.5",
    "INTERLUDE_STREAM_LINGER_SECONDS": "0.3",
    "INTERLUDE_STREAM_RETRY_MS": "100",
}


def sdk(api: Api, org: str | None = None) -> Modulex:
    """modulex-python as the stack's tenant (or `org`), no retries, so each refusal is seen as answered."""
    return Modulex(api_key=api.api_key, organization_id=org or api.tenant, base_url=api.base_url, max_retries=0)


async def listen_until(client: Modulex, run_id: str, wanted: str, deadline_s: float) -> list:
    """Every frame of the connection that carried a frame of type `wanted` (each connection replays the run's
    history from the start; one that ends without it is opened again, up to the deadline)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    while loop.time() < deadline:
        seen = []
        async with client.executions.listen(run_id) as stream:
            async for event in stream:
                seen.append(event)
                if event.event == wanted:
                    return seen
    raise AssertionError(f"no {wanted!r} frame on {run_id} within {deadline_s} s")
