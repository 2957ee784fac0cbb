"""Lambda entry point for every HTTP route (API Gateway HTTP API, payload format 2.0)."""

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import defer_unused_modules, importing

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from interlude import config
    from interlude.adapters import metrics
    from interlude.api.app import lambda_handler
    from interlude.composition import compose
    from interlude.sdk_clients import use_packaged_models

    # Before any client is made: they read the layer's own copy of the SDK data (interlude/adapters/sdk_data.py).
    use_packaged_models()
    compose()
    metrics.count_caught_errors()
    config.check()

    try:
        # The managed runtime ships it; a function published with SnapStart (InterludeProps.api_snap_start) calls
        # what is registered here before the snapshot and in every instance restored from it.
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:  # not Lambda's runtime: nothing is ever restored
        pass
    else:
        from interlude.api.snapstart import after_restore, before_snapshot

        register_before_snapshot(before_snapshot)
        register_after_restore(after_restore)

__all__ = ["lambda_handler"]
