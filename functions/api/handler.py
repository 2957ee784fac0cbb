"""Lambda entry point for every HTTP route (API Gateway HTTP API, payload format 2.0)."""

from interlude.api.app import lambda_handler
from interlude.composition import compose

compose()

__all__ = ["lambda_handler"]
