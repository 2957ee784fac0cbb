"""Lambda entry point for every HTTP route (API Gateway HTTP API, payload format 2.0)."""

import gc
import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# The import makes ~90,000 objects that live as long as the process (modules, classes, functions), and the cyclic
# collector walked them all, more than once, while they were being made (≈ a tenth of the import's CPU). It stays off
# until they exist, then they go to the permanent generation (never walked again) and it is on for the requests.
# Cost: the few hundred cyclic garbage objects the import leaves (≈ 200 KB) are frozen with them, once per instance.
collecting = gc.isenabled()
gc.disable()
try:
    from interlude.api.app import lambda_handler
    from interlude.composition import compose

    compose()
finally:
    gc.freeze()
    if collecting:
        gc.enable()

__all__ = ["lambda_handler"]
