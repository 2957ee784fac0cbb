"""The HTTP face: powertools resolver, error envelope, auth; routes come from interlude.wiring.ROUTES."""

from interlude.api.powertools import skip_package_init

# Before any module of this package imports the resolver: only its own module loads (api/powertools.py).
skip_package_init()
