"""The HTTP face: powertools resolver, error envelope, auth; routes come from interlude.wiring.ROUTES."""

from interlude.coldstart import DATA_CLASSES, EVENT_HANDLER, defer_unused_modules, lazy_package

# Before Powertools' package (its logger imports gzip) and botocore import them: modules a resolve never runs (the
# handler registers them first; this is for every other importer of the face, as the local stack).
defer_unused_modules()
# Before any module of this package imports the resolver: only its own module loads, and of the event data classes
# only the seven it imports by name (interlude/coldstart.py). The route modules import `Response` from
# `event_handler.api_gateway` for the same reason (tests/unit/test_cold_imports.py).
lazy_package(EVENT_HANDLER, by_name=False)
lazy_package(DATA_CLASSES)
