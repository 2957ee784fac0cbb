"""The HTTP face: powertools resolver, error envelope, auth; routes come from interlude.wiring.ROUTES."""

from interlude.coldstart import (
    BOTOCORE_DOCS,
    BOTOCORE_RESTDOC,
    CONFIGPARSER,
    DATA_CLASSES,
    DATEUTIL_PARSER,
    EVENT_HANDLER,
    GZIP,
    IMPORTLIB_METADATA,
    URLLIB3_HTTP2,
    lazy_package,
)

# Before Powertools' package (its logger imports gzip) and botocore import them: modules a resolve never runs.
lazy_package(GZIP, by_name=False, called=("GzipFile", "compress", "open"))
lazy_package(CONFIGPARSER, by_name=False)
# Before any module of this package imports the resolver: only its own module loads, and of the event data classes
# only the seven it imports by name (interlude/coldstart.py). The route modules import `Response` from
# `event_handler.api_gateway` for the same reason (tests/unit/test_cold_imports.py).
lazy_package(EVENT_HANDLER, by_name=False)
lazy_package(DATA_CLASSES)
# Before the store imports botocore (and with it urllib3): neither loads the package `__init__`s it never uses.
lazy_package(URLLIB3_HTTP2, by_name=False)
lazy_package(IMPORTLIB_METADATA, by_name=False, called=("entry_points",))
lazy_package(BOTOCORE_DOCS, by_name=False)
lazy_package(BOTOCORE_RESTDOC, by_name=False, called=("DocumentStructure",))
lazy_package(DATEUTIL_PARSER, by_name=False, called=("parse",))
