"""A page's submitted form (application/x-www-form-urlencoded) as the approval page and the console read it: parsed
once (`read_form`), then each field that holds one value read with `one`.

A page's own form sends each field once; the fields a person may tick several of (check boxes: a key's scopes, the
runs to cancel, a gate's multiple choice) share one name and are read as the list they are. Anything else sent more
than once says nothing for sure: read by its first value, a crafted form could show one value to a check and act on
another, so the whole form is refused as bad input (a 400 that each surface says on its own page), never read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import parse_qs

from interlude.domain.errors import Invalid

# Said on the surface's refusal page: no field's name, which is the form's internals, not the person's words.
REPEATED = "the form sent one of its fields more than once"


def read_form(raw: str, most_fields: int) -> dict[str, list[str]]:
    try:
        return parse_qs(raw, keep_blank_values=True, max_num_fields=most_fields)
    except ValueError:
        raise Invalid("the form has too many fields") from None


def one(form: Mapping[str, Sequence[str]], name: str) -> str | None:
    """The field's one value (None: the form did not send it); Invalid when it was sent more than once."""
    values = form.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise Invalid(REPEATED, {"field": name})
    return values[0]
