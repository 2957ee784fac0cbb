"""The HTTP face: powertools resolver, error envelope, auth; routes come from interlude.wiring.ROUTES."""
