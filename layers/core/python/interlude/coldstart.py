"""What every Lambda entry point does around its import, once per instance."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    # An import makes tens of thousands of objects that live as long as the process (modules, classes, functions), and
    # the cyclic collector walked them all, more than once, while they were being made: about a tenth of a handler's
    # import CPU. It stays off until they exist; then they go to the permanent generation (never walked again) and it
    # is on for the invocations. Cost: the few hundred cyclic garbage objects an import leaves (≈ 200 KB) are frozen
    # with them, once per instance.
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
