"""A request body validated against a pydantic model: the one 400 `validation_error` shape for every model.

In the domain, below every application service that parses bodies, so none has to import another to do it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from interlude.domain.errors import Invalid


def validation_details(exc: ValidationError) -> dict[str, Any]:
    errors = []
    for err in exc.errors(include_url=False, include_input=False):
        path = "/".join(str(p) for p in err["loc"])
        errors.append({"path": path, "message": err["msg"]})
    return {"errors": errors}


Model = TypeVar("Model", bound=BaseModel)


def parse(model: type[Model], body: Any, what: str, *, closed: bool = True) -> Model:
    """A request body as `model`: closed (an unknown field, nested ones too, is refused) whatever the model keeps when
    it reads what is stored (interlude.domain.models says why). Not `closed`: a stored document changed in place."""
    if not isinstance(body, dict):
        raise Invalid(f"{what} must be a JSON object")
    try:
        return model.model_validate(body, extra="forbid" if closed else None)
    except ValidationError as exc:
        raise Invalid(f"{what} is not valid", validation_details(exc)) from None
