"""A gate's short form as a Slack modal (rules/slack_forms.py): what Slack can show and what it cannot, and the
answer read back as the page reads its form (issue 28 item 6). The HTTP round trip is
tests/integration/test_slack_interactivity.py's."""

from __future__ import annotations

from typing import Any

from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.rules.slack_forms import answer_of, form_modal, modal_form


def modulex(schema: dict[str, Any]) -> dict[str, Any]:
    """A ModuleX interrupt asking `schema` (its resume_schema)."""
    return {"kind": "custom", "key": "k", "data": {"customKind": MODULEX_INTERRUPT_KIND, "payload": {"message": "Check the order", "resume_schema": schema}}}


ORDER = {
    "type": "object",
    "required": ["ok"],
    "properties": {
        "ok": {"type": "boolean", "title": "Looks right"},
        "note": {"type": "string", "maxLength": 2000},
        "tags": {"type": "array", "items": {"enum": ["rush", "gift"]}},
        "venue": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 80}}},
    },
}


def test_a_modulex_form_is_drawn_control_by_control_and_read_back_as_the_page_reads_it():
    spec = modal_form(modulex(ORDER), {"note": "Note for the packer"})
    assert spec is not None
    view = form_modal("Check the order", spec, '{"r":"t/r","n":"n","i":"i"}')
    blocks = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert (blocks["f0"]["label"]["text"], blocks["f0"]["element"]["type"], blocks["f0"]["optional"]) == ("Looks right", "static_select", False)
    assert [o["text"]["text"] for o in blocks["f0"]["element"]["options"]] == ["Yes", "No"]
    assert (blocks["f1"]["label"]["text"], blocks["f1"]["element"]["multiline"], blocks["f1"]["optional"]) == ("Note for the packer", True, True)
    assert blocks["f2"]["element"]["type"] == "checkboxes"
    # An object one level deep is asked field by field, named by its group.
    assert blocks["f3_0"]["label"]["text"] == "venue: city"

    values = {
        "f0": {"value": {"type": "static_select", "selected_option": {"value": "false"}}},
        "f1": {"value": {"type": "plain_text_input", "value": None}},
        "f2": {"value": {"type": "checkboxes", "selected_options": [{"value": "gift"}]}},
        "f3_0": {"value": {"type": "plain_text_input", "value": "Lyon"}},
    }
    assert answer_of(spec, values) == ({"ok": False, "tags": ["gift"], "venue": {"city": "Lyon"}}, {})
    assert answer_of(spec, {})[1] == {"f0": "Please answer this."}


def test_a_form_slack_cannot_show_is_not_drawn():
    many = {"type": "object", "properties": {f"q{i}": {"type": "string"} for i in range(51)}}
    eleven = {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": [f"t{i}" for i in range(11)]}}}}
    deep = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"type": "string"}}}}}}}
    when = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}
    for schema in (many, eleven, deep, when):
        assert modal_form(modulex(schema)) is None
    # An approval is decided with buttons, never this form.
    assert modal_form({"kind": "approval", "data": {"title": "t", "actions": ["accept"]}}) is None
