"""The answers of the route areas other than the run lifecycle, one module per area (see interlude.domain.models.responses)."""
