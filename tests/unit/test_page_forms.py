"""The pages' one form renderer and their templates: a gate's form is the same on the approval page and in the
console, a field says its error beside it, and every template compiles once and is kept."""

from __future__ import annotations

import re

import pytest

from interlude.api.console import pages
from interlude.api.page import approval, forms, templating
from interlude.rules.interrupts.payloads import approval_resume_schema

HOSTILE = '<script>alert("x")</script>&\'"'
FRAME = pages.Frame(subject_id="ana", tenant="acme", proof="p" * 64)
SCHEMA = {
    "type": "object",
    "required": ["amount", "currency"],
    "properties": {
        "amount": {"type": "number", "title": "Amount"},
        "count": {"type": "integer"},
        "currency": {"enum": ["EUR", "USD"]},
        "region": {"enum": ["eu", "us"]},
        "urgent": {"type": "boolean"},
        "reference": {"type": "string", "maxLength": 40},
        "note": {"type": "string"},
        "extra": {"type": "object"},
        "shape": {"enum": [{"a": 1}]},
    },
}
PAYLOADS = {
    "approval": {
        "kind": "approval",
        "key": "k",
        "data": {"title": "Ship?", "actions": ["accept", "reject", "refine", "edit-accept", "ask"], "artifactData": {"a": 1}},
        "resumeSchema": approval_resume_schema(["accept", "reject", "refine", "edit-accept", "ask"]),
    },
    "refine only": {
        "kind": "approval",
        "key": "k",
        "data": {"title": "Ship?", "actions": ["refine"]},
        "resumeSchema": approval_resume_schema(["refine"]),
    },
    "custom": {"kind": "custom", "key": "k", "data": {"customKind": "pay"}, "resumeSchema": SCHEMA},
    "external event": {"kind": "external-event", "key": "k", "data": {"eventType": "paid", "correlation": {}}},
}


CONTROL = re.compile(r"<(input|select|textarea|button)\b([^>]*)>")
ATTRIBUTE = re.compile(r'([a-z-]+)(?:="([^"]*)")?')


def controls(markup: str) -> list[tuple]:
    """(tag, type, name, a button's value, its tone or the json class, required) of every form control, in order:
    what a browser shows, submits and checks. The console's `small` buttons are the same buttons."""
    found = []
    for tag, attrs in CONTROL.findall(markup):
        a = dict(ATTRIBUTE.findall(attrs))
        tone = a.get("class", "").replace("small", "").strip()
        found.append((tag, a.get("type"), a.get("name"), a.get("value") if tag == "button" else None, tone, "required" in a))
    return found


def approval_page_form(payload: dict) -> str:
    view = approval.View(payload, "gate", "resolve", "waiting-approval", 1_800_000_000)
    return approval.render_open(view, style_nonce="n", csrf_field="c" * 64)


def inbox_form(payload: dict) -> str:
    item = {"runId": "acme/r-1", "nodeId": "gate", "workflowId": "wf", "kind": payload["kind"], "payload": payload}
    return pages.inbox(FRAME, [item], None, None)


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_the_console_and_the_approval_page_draw_a_gates_form_alike(kind):
    # Given one gate / When the approval page and the console's inbox draw its form
    on_the_page = [c for c in controls(approval_page_form(PAYLOADS[kind])) if c[2] != "csrf"]
    in_the_inbox = [c for c in controls(inbox_form(PAYLOADS[kind])) if c[2] not in ("csrf", "back")]
    # Then the same controls are asked, of the same kinds, with the same names, buttons and required marks
    assert on_the_page == in_the_inbox
    assert on_the_page


def test_a_schema_asks_each_value_with_the_control_its_type_takes():
    fields = {f.name: f for form in forms.gate_forms(PAYLOADS["custom"]) for f in form.fields}
    assert [(f.widget, f.required) for f in fields.values()] == [
        ("number", True),
        ("number", False),
        ("select", True),
        ("select", False),
        ("checkbox", False),
        ("text", False),
        ("textarea", False),
        ("json", False),
        ("json", False),  # an enum of objects cannot be a choice list: its value is asked as JSON
    ]
    # An optional choice can be left empty; a required one cannot
    assert fields["f3"].choices[0] == forms.Choice("", "")
    assert "" not in [c.value for c in fields["f2"].choices]
    assert (fields["f0"].step, fields["f1"].step, fields["f5"].max_length) == ("any", "1", 40)


def test_a_field_shows_its_value_and_says_its_error_beside_it_escaped():
    field = forms.Field("f0", "Amount", "number", value=HOSTILE, error=f"Not a number: {HOSTILE}", required=True)
    form = forms.Form((field,), (forms.Button("submit", "Send"),))
    markup = _gate([form])
    assert "<script>" not in markup
    assert f'value="{_escaped(HOSTILE)}"' in markup
    assert 'aria-invalid="true" aria-describedby="x-f0-error"' in markup
    assert f'<p class="field-error" id="x-f0-error">Not a number: {_escaped(HOSTILE)}</p>' in markup
    # A field without an error is drawn without one
    clean = _gate([forms.Form((forms.Field("f0", "Amount", "number"),), ())])
    assert "aria-invalid" not in clean
    assert "field-error" not in clean


def test_every_template_compiles():
    env = templating.environment()
    names = env.list_templates()
    assert {"page/layout.html", "page/forms.html", "console/layout.html"} <= set(names)
    for name in names:
        env.get_template(name)


def test_a_warm_render_neither_reads_nor_compiles_a_template_again(monkeypatch):
    env = templating.environment()
    approval_page_form(PAYLOADS["approval"])
    loaded = []
    monkeypatch.setattr(env.loader, "load", lambda *args, **kw: loaded.append(args) or pytest.fail("loaded again"))
    approval_page_form(PAYLOADS["approval"])
    assert loaded == []


def test_a_name_a_template_does_not_have_fails_the_render():
    with pytest.raises(Exception, match="undefined"):
        templating.render("page/result.html", cls="ok", heading="h", sentence="s")


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace("'", "&#x27;")


def _gate(gate_forms: list[forms.Form]) -> str:
    macro = templating.environment().get_template("page/forms.html").module.gate  # type: ignore[attr-defined]
    return str(macro(gate_forms, "/post", (("csrf", "c"),), "x-"))


def every_page() -> list[str]:
    """The approval page of each gate kind, open and decided, and the console's pages that draw gates and tables."""
    drawn = []
    for payload in PAYLOADS.values():
        drawn.append(approval.document("t", approval_page_form(payload), "n"))
        view = approval.View(payload, "gate", "inspect", "completed", 1_800_000_000)
        drawn.append(approval.render_result(approval.Result("decided", action="accept", run_status="completed"), view))
        drawn.append(pages.document("Inbox", inbox_form(payload), "n", FRAME, "inbox", go_to="/console/inbox"))
    drawn.append(pages.keys(FRAME, [{"keyId": "k1", "status": "active"}], "c", None, {"apiKey": HOSTILE}, ["runs:read"]))
    drawn.append(pages.audit(FRAME, [{"chain": "c", "seq": 1, "actor": {"subjectId": HOSTILE}}], "c", None))
    drawn.append(pages.sign_in("proof", pages.Notice("bad", HOSTILE, HOSTILE, (HOSTILE,))))
    return drawn


def test_the_templates_compiled_for_the_package_layer_draw_every_page_as_their_sources_do(tmp_path, monkeypatch):
    # Given every template compiled to Python modules, as interlude_cdk/layer.py ships them
    compiled = tmp_path / "compiled"
    templating.compile_all(compiled)
    from_sources = every_page()
    # When the pages are drawn from the compiled modules
    env = templating.make_environment(compiled)
    assert type(env.loader).__name__ == "ModuleLoader"
    monkeypatch.setattr(templating, "environment", lambda: env)
    # Then they are the same pages
    assert every_page() == from_sources


def test_templates_compiled_by_another_jinja2_are_not_used(tmp_path):
    compiled = tmp_path / "compiled"
    templating.compile_all(compiled)
    (compiled / templating.COMPILED_BY).write_text("2.11.3")
    assert type(templating.make_environment(compiled).loader).__name__ == "PrefixLoader"
    assert type(templating.make_environment(tmp_path / "none").loader).__name__ == "PrefixLoader"
