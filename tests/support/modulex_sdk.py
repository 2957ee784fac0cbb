"""modulex-python against a stack: following a run's frames across the listen's bounded responses."""

from __future__ import annotations

import asyncio

from modulex import Modulex


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
