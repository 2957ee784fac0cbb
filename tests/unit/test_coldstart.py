"""What an entry point's import runs in (interlude/coldstart.py): the classes it makes are the same classes."""

from __future__ import annotations

import sys
import typing

import pytest

from interlude.coldstart import forward_refs_compiled_at_use

needs_314 = pytest.mark.skipif(sys.version_info < (3, 14), reason="earlier Pythons compile in ForwardRef itself")


def point_class() -> type:
    class Point(typing.NamedTuple):
        x: int
        label: str | None = None

    return Point


@needs_314
def test_an_import_leaves_string_annotations_to_compile_where_they_are_evaluated():
    with forward_refs_compiled_at_use():
        Point = point_class()  # noqa: N806
    assert typing._make_forward_ref.__name__ == "_make_forward_ref"  # restored once the import is done
    # `from __future__ import annotations`: each annotation is a string, made a ForwardRef by the NamedTuple.
    ref = Point.__annotations__["x"]
    assert ref.__code__ is None
    assert typing.get_type_hints(Point) == {"x": int, "label": str | None}
    assert Point(1) == (1, None)
    assert Point._fields == ("x", "label")


@needs_314
def test_outside_an_import_typing_compiles_as_it_ships():
    assert point_class().__annotations__["x"].__code__ is not None


def test_an_import_made_class_is_the_class_typing_makes():
    with forward_refs_compiled_at_use():
        inside = point_class()
    outside = point_class()
    assert inside._fields == outside._fields
    assert inside._field_defaults == outside._field_defaults
    assert typing.get_type_hints(inside) == typing.get_type_hints(outside)
