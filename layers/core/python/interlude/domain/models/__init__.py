"""Pydantic models of what Interlude stores and exchanges.

Strictness lives at the API edge, tolerance in storage (docs/adr/0084): a request
body is validated closed wherever it is parsed (interlude.domain.validation.parse: an unknown field is a 400), while
a stored document is read by whichever release reads it, the previous one too, so its model keeps the fields it does
not know and writes them back. Every model's JSON Schema says closed: it describes what a request may send and what
an answer holds.
"""

from typing import Annotated, Any, Optional, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.config import ExtraValues, JsonDict

# The schema of every model (request bodies, answers, stored documents) is closed, whatever `extra` does at runtime.
CLOSED_SCHEMA: JsonDict = {"additionalProperties": False}


class Closed(BaseModel):
    """A request body only (never stored): an unknown field is refused (a 400 validation_error at the API)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Stored(BaseModel):
    """A document that is stored (and may also arrive as a request body, held closed by the edge's parse): a field
    it does not know, written by a later release, is kept on the model and written back with it."""

    model_config = ConfigDict(extra="allow", defer_build=True, json_schema_extra=CLOSED_SCHEMA)


class FrozenStored(BaseModel):
    """Stored and immutable: workflow definitions and node configs, which are shared once parsed."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True, json_schema_extra=CLOSED_SCHEMA)


def new_list() -> list[Any]:
    """A list field's default (`Field(default_factory=new_list)`), in place of `list`: building a model's validator,
    pydantic asks each default factory's signature, and `list`'s is parsed from its text (inspect's tokenizer: ≈ 80 µs
    a field, ≈ 2 ms for the first of a process), where a function's is read from its code (≈ 5 µs). ADR 0130."""
    return []


# A gate's `fieldLabels`: what a person reads for each field it shows or asks (its artifact's, its form's), by dotted
# path ("refund.amount": "Amount to refund"); presentation only, never in the payload (api/page/names.py). Every gate
# type's config takes it, checked alike at registration.
FieldLabels = Annotated[dict[str, Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=500)]


class Answer(BaseModel):
    """What a route answers: a field it does not declare (a stored document's, written by a later release) is left
    out of the answer, nested stored documents' too, so a release answers its own schema whatever it reads."""

    model_config = ConfigDict(extra="ignore", defer_build=True, json_schema_extra=CLOSED_SCHEMA)

    @classmethod
    def model_validate(cls, obj: Any, *, extra: ExtraValues | None = None, **options: Any) -> Self:
        return super().model_validate(obj, extra=extra or "ignore", **options)


StoredModel = TypeVar("StoredModel", bound=BaseModel)


def keeping_unknown(replacement: StoredModel, stored: BaseModel | None) -> StoredModel:
    """`replacement` (a whole document a request puts in place of the stored one) with the fields `stored` holds that
    this release does not know, nested documents' too: a field a later release wrote outlives a replacement by a
    client of this one, which could neither see nor clear it."""
    if stored is None:
        return replacement
    nested = {
        name: keeping_unknown(value, getattr(stored, name, None))
        for name in type(replacement).model_fields
        if isinstance(value := getattr(replacement, name), BaseModel) and isinstance(getattr(stored, name, None), BaseModel)
    }
    return replacement.model_copy(update={**(stored.model_extra or {}), **(replacement.model_extra or {}), **nested})


def merge_patch_of(model: type[BaseModel]) -> type[BaseModel]:
    """The body of a JSON merge patch (RFC 7396) of `model`, for the contract: each field optional and nullable
    (null takes it back to its default), with its constraints; a nested document a patch of its own."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation: Any = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            annotation = merge_patch_of(annotation)
        constrained = Annotated[annotation, *info.metadata] if info.metadata else annotation
        fields[name] = (Optional[constrained], None)  # noqa: UP045 - `constrained` is a value, not an annotation
    patch: type[BaseModel] = create_model(f"{model.__name__}Patch", __base__=Closed, __module__=model.__module__, **fields)
    return patch
