"""Pydantic models of what Interlude stores and exchanges."""

from pydantic import BaseModel, ConfigDict


class Closed(BaseModel):
    """A closed body: an unknown field is refused (a 400 validation_error at the API)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class FrozenClosed(BaseModel):
    """Closed and immutable: workflow definitions and node configs, which are shared once parsed."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
