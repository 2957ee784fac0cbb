"""The pages' one form renderer and their templates: a gate's form is the same on the approval page and in the
console, a field says its error beside it, and every template compiles once and is kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interlude.api.console import pages
from interlude.api.page import approval, forms, templating
from interlude.domain.errors import Invalid
from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.domain.models.workflow import Variable
from interlude.engine.gates import CREDENTIAL_RESUME_SCHEMA, LOW_CONFIDENCE_RESUME_SCHEMA
from interlude.rules import inputs as declared_inputs
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


def approval_page_form(payload: dict, answer: forms.Answer | None = None) -> str:
    view = approval.View(payload, "gate", "resolve", "waiting-approval", 1_800_000_000)
    return approval.render_open(view, style_nonce="n", csrf_field="c" * 64, answer=answer)


def inbox_form(payload: dict) -> str:
    item = {"runId": "acme/r-1", "nodeId": "gate", "workflowId": "wf", "kind": payload["kind"], "payload": payload}
    markup = pages.inbox(FRAME, [item], None, None)
    # The item's forms, after the inbox's own filters.
    return markup[markup.index('<section class="card" aria-labelledby="item-0">'):]


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
        ("radio", False),  # yes / no: unchosen until chosen
        ("text", False),
        ("textarea", False),
        ("json", False),  # an object without properties: JSON, folded under "Advanced"
        ("json", False),  # an enum of objects cannot be a choice list: its value is asked as JSON
    ]
    assert fields["f7"].advanced
    assert fields["f8"].advanced
    # No choice is made for the person: a required one starts on "Choose…", an optional one may stay "(none)"
    assert fields["f2"].choices[0] == forms.Choice("", "Choose…")
    assert fields["f2"].value == ""
    assert fields["f3"].choices[0] == forms.Choice("", "(none)")
    assert (fields["f0"].step, fields["f1"].step, fields["f5"].max_length) == ("any", "1", 40)
    # Labels: a schema's title, else its key; an optional question says so
    assert (fields["f0"].label, fields["f1"].label) == ("Amount", "count (optional)")


RICH = {
    "type": "object",
    "required": ["email", "when", "party", "tags", "size"],
    "properties": {
        "email": {"type": "string", "format": "email", "title": "Your e-mail", "description": "Where the receipt goes"},
        "day": {"type": "string", "format": "date"},
        "when": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "party": {
            "type": "object",
            "title": "Who pays",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 2, "maxLength": 80}, "vat": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"}},
        },
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "sizes": {"type": "array", "items": {"enum": ["S", "M", "L"]}},
        "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
        "source": {"const": "page"},
        "ticket": {"type": "string", "readOnly": True, "default": "T-1"},
        "choice": {"oneOf": [{"type": "string"}, {"type": "number"}]},
    },
}
RICH_PAYLOAD = {"kind": "custom", "key": "k", "data": {"customKind": "pay"}, "resumeSchema": RICH}
RICH_ANSWER = {
    "f0": ["ana@example.com"],
    "f1": ["2026-12-24"],
    "f2": ["2026-12-24T09:30"],
    "f3": ["https://example.com/a"],
    "f4_0": ["Ana Lima"],
    "f4_1": ["PT123"],
    "f5": ["red\n\n blue "],
    "f6": ["S", "L"],
    "f7": ["4"],
    "f10": [""],
}


def test_every_keyword_people_use_in_forms_is_drawn():
    fields = {f.name: f for form in forms.gate_forms(RICH_PAYLOAD) for f in form.fields}
    widgets = {name: f.widget for name, f in fields.items()}
    assert widgets == {
        "f0": "email",
        "f1": "date",
        "f2": "datetime-local",
        "f3": "url",
        "f4": "group",
        "f5": "lines",
        "f6": "checkboxes",
        "f7": "number",
        "f8": "shown",
        "f9": "shown",
        "f10": "json",
    }
    assert (fields["f0"].label, fields["f0"].hint) == ("Your e-mail", "Where the receipt goes")
    assert fields["f2"].label == "when (UTC)"
    party = fields["f4"]
    assert party.label == "Who pays"
    assert [(p.name, p.label, p.required, p.min_length, p.max_length) for p in party.fields] == [
        ("f4_0", "name", True, 2, 80),
        ("f4_1", "vat (optional)", False, None, None),
    ]
    assert [c.value for c in fields["f6"].choices] == ["S", "M", "L"]
    # A default fills the field in; a constant and a read-only value are shown, not asked
    assert (fields["f7"].value, fields["f7"].minimum, fields["f7"].maximum) == ("3", "1", "10")
    assert (fields["f8"].value, fields["f9"].value) == ("page", "T-1")
    markup = approval_page_form(RICH_PAYLOAD)
    assert 'type="number" step="1" id="f7" name="f7" value="3" required min="1" max="10"' in markup
    assert 'minlength="2" maxlength="80"' in markup
    assert '<details class="advanced"><summary>Advanced: choice (JSON)</summary>' in markup
    assert 'aria-describedby="f0-hint"' in markup


def test_an_answer_reads_back_as_the_schema_types_it():
    assert forms.resume_from_form(RICH_PAYLOAD, RICH_ANSWER) == {
        "email": "ana@example.com",
        "day": "2026-12-24",
        "when": "2026-12-24T09:30:00Z",
        "site": "https://example.com/a",
        "party": {"name": "Ana Lima", "vat": "PT123"},
        "tags": ["red", "blue"],
        "sizes": ["S", "L"],
        "size": 4,
        "source": "page",
        "ticket": "T-1",
    }


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"f0": ["ana"]}, "f0", "Must be an e-mail address."),
        ({"f1": ["24/12/2026"]}, "f1", "Must be a date."),
        ({"f3": ["example"]}, "f3", "Must be a web address, with https:// in front."),
        ({"f4_0": ["A"]}, "f4_0", "Must be at least 2 characters long."),
        ({"f4_1": ["pt123"]}, "f4_1", "This is not in the form this answer needs."),
        ({"f4_0": [""]}, "f4_0", "Please answer this."),
        ({"f5": [""]}, "f5", "Please answer this."),
        ({"f6": ["XL"]}, "f6", "Choose among the listed options."),
        ({"f7": ["11"]}, "f7", "Must be at most 10."),
        ({"f7": ["2.5"]}, "f7", "Must be a whole number."),
        ({"f10": ["{"]}, "f10", "This is not valid JSON; check the brackets, commas and quotes."),
    ],
)
def test_a_refused_answer_says_what_to_fix_beside_its_field_and_keeps_every_value(change, field, words):
    # Given an answer with one thing wrong
    posted = {**RICH_ANSWER, **change}
    # When it is read
    with pytest.raises(forms.FormError) as refused:
        forms.resume_from_form(RICH_PAYLOAD, posted)
    # Then the problem is named beside that field, and nowhere else
    assert refused.value.fields == {field: words}
    # And the form drawn again holds every value as it was typed, the message beside its field
    markup = approval.render_open(
        approval.View(RICH_PAYLOAD, "gate", "resolve", "waiting-input", 1_800_000_000),
        style_nonce="n",
        csrf_field="c",
        error=str(refused.value),
        answer=forms.Answer(posted, refused.value.fields),
    )
    assert f'<p class="field-error" id="{field}-error">{_escaped(words)}</p>' in markup
    assert 'value="ana@example.com"' in markup or change == {"f0": ["ana"]}
    assert ">red\n\n blue </textarea>" in markup or "f5" in change
    assert ('value="S" checked' in markup and 'value="L" checked' in markup) or "f6" in change


def test_the_schema_validator_refusals_land_beside_the_field_their_path_names():
    schema = {"type": "object", "properties": {"n": {"type": "number", "exclusiveMinimum": 0}, "o": {"type": "object", "properties": {"x": {"type": "integer", "multipleOf": 5}}}}}
    payload = {"kind": "custom", "key": "k", "data": {"customKind": "x"}, "resumeSchema": schema}
    with pytest.raises(forms.FormError) as refused:
        forms.resume_from_form(payload, {"f0": ["0"], "f1_0": ["7"]})
    assert refused.value.fields == {"f0": "Must be more than 0.", "f1_0": "Must be a multiple of 5."}


def test_a_required_choice_starts_unselected_and_an_optional_question_may_stay_blank():
    schema = {"type": "object", "required": ["plan"], "properties": {"plan": {"enum": ["basic", "pro"]}, "ok": {"type": "boolean"}, "note": {"type": "string"}}}
    payload = {"kind": "custom", "key": "k", "data": {"customKind": "x"}, "resumeSchema": schema}
    markup = approval_page_form(payload)
    assert '<option value="" selected>Choose…</option><option value="basic">basic</option><option value="pro">pro</option>' in markup
    assert "checked" not in markup
    assert forms.resume_from_form(payload, {"f0": ["pro"], "f2": [""]}) == {"plan": "pro"}
    with pytest.raises(forms.FormError) as refused:
        forms.resume_from_form(payload, {"f0": [""]})
    assert refused.value.fields == {"f0": "Please answer this."}


WORKED = json.loads((Path(__file__).resolve().parents[2] / "examples/worker/approve-before-sending.json").read_text())
MODULEX = {
    "kind": "custom",
    "key": "k",
    "data": {
        "customKind": "modulex.interrupt",
        "payload": {
            "message": "Approve sending this draft?\n\nDear Ana,\nyour refund is on its way.",
            "data": {},
            **{k: v for k, v in WORKED["nodes"][1]["interrupt_config"].items() if k != "message"},
        },
    },
}


def test_a_modulex_interrupt_asks_its_resume_schema_with_its_message_and_examples():
    markup = approval_page_form(MODULEX)
    # Its message: the first line as the title, the rest with its line breaks
    assert "<h1>Approve sending this draft?</h1>" in markup
    assert '<p class="para">Dear Ana,\nyour refund is on its way.</p>' in markup
    # Its schema as fields, its examples as buttons of their own form (no field to fill, so nothing blocks them)
    assert [c[:4] for c in controls(markup) if c[2] != "csrf"] == [
        ("button", "submit", "example", "0"),
        ("button", "submit", "example", "1"),
        ("input", "radio", "f0", None),
        ("input", "radio", "f0", None),
        ("textarea", None, "f1", None),
        ("button", "submit", "action", "submit"),
    ]
    assert ">approve</button>" in markup
    assert ">reject</button>" in markup
    for word in ("modulex", "resume_schema", "Input requested", "JSON"):
        assert word not in markup
    # An example fills the form in for the person to check
    filled = forms.example_answer(MODULEX, {"example": ["1"]})
    assert filled == forms.Answer({"f0": ["false"], "f1": ["Tone too casual"]}, example="reject")
    assert 'value="false" checked' in approval_page_form(MODULEX, filled)
    # What a person types reads back as the schema says: "no, too casual" is a note, not bad JSON
    assert forms.resume_from_form(MODULEX, {"f0": ["false"], "f1": ["no, too casual"]}) == {"approved": False, "notes": "no, too casual"}
    with pytest.raises(forms.FormError):
        forms.example_answer(MODULEX, {"example": ["7"]})


def test_edit_accept_edits_the_artifact_field_by_field_in_its_order_with_its_labels():
    artifact = {"customer": {"name": "Ana", "vip": True}, "amount": 120.5, "lines": ["refund", "voucher"], "note": "", "raw": None}
    payload = {
        "kind": "approval",
        "key": "k",
        "data": {"title": "Refund?", "actions": ["edit-accept"], "artifactData": artifact},
        "resumeSchema": approval_resume_schema(["edit-accept"]),
    }
    form = forms.gate_forms(payload, labels={"customer.name": "Customer", "amount": "Amount (EUR)"})[0]
    assert form.folded == "Approve with my edits"
    assert [(f.name, f.label, f.widget, f.value) for f in form.fields] == [
        ("e0", "customer", "group", ""),
        ("e1", "Amount (EUR)", "number", "120.5"),
        ("e2", "lines", "lines", "refund\nvoucher"),
        ("e3", "note", "text", ""),
        ("e4", "raw (JSON)", "json", "null"),
    ]
    assert [(f.label, f.widget, f.value) for f in form.fields[0].fields] == [("Customer", "text", "Ana"), ("vip", "radio", "true")]
    # One field changed: the rest comes back as it was, in the author's order
    posted = {"action": ["edit-accept"], "e0_0": ["Ana"], "e0_1": ["true"], "e1": ["99"], "e2": ["refund\nvoucher"], "e3": [""], "e4": ["null"]}
    assert forms.resume_from_form(payload, posted) == {"action": "edit-accept", "editedArtifactData": {**artifact, "amount": 99}}
    with pytest.raises(forms.FormError) as refused:
        forms.resume_from_form(payload, {**posted, "e1": ["ninety"]})
    assert refused.value.fields == {"e1": "Must be a number."}


LABELLED = {
    "clarification": (
        {"kind": "clarification", "key": "k", "data": {"questions": [{"id": "po", "question": "po"}]}},
        {"po": "Purchase order number"},
    ),
    "custom": (PAYLOADS["custom"], {"amount": "Amount to pay (EUR)", "count": "How many"}),
    "ModuleX interrupt": (MODULEX, {"approved": "Send it?"}),
    "low-confidence": (
        {
            "kind": "low-confidence",
            "key": "k",
            "data": {"agentId": "triage", "observed": 0.4, "threshold": 0.7, "decision": {"queue": "vip"}},
            "resumeSchema": LOW_CONFIDENCE_RESUME_SCHEMA,
        },
        # A path names a field of what the gate shows (here the agent's decision) or of what it asks
        {"action": "Your call", "queue": "Queue"},
    ),
    "credential": (
        {
            "kind": "credential",
            "key": "k",
            "data": {"provider": "github", "scopes": [], "reason": "missing", "connectUrl": "https://c.example.com/"},
            "resumeSchema": CREDENTIAL_RESUME_SCHEMA,
        },
        {"outcome": "Is GitHub connected?"},
    ),
    "conversation turn": (
        {"kind": "conversation.exchange", "key": "k", "data": {"conversationId": "c", "prompt": "Which plan?", "outcomeSchema": {"type": "object", "properties": {"plan": {"type": "string"}}}}},
        {"plan": "Plan chosen"},
    ),
}


@pytest.mark.parametrize("kind", sorted(LABELLED))
def test_a_gates_field_labels_name_its_fields_whatever_its_kind_on_the_page_and_in_the_console(kind):
    # Given a gate of any kind that draws a form (or shows data) and the labels its author gave its fields
    payload, labels = LABELLED[kind]
    view = approval.View(payload, "gate", "resolve", "waiting-input", 1_800_000_000, labels=labels)
    page = approval.render_open(view, style_nonce="n", csrf_field="c" * 64)
    item = {"runId": "acme/r-1", "nodeId": "gate", "workflowId": "wf", "kind": payload["kind"], "payload": payload}
    context = pages.RunContext(pages.Names("wf", labels={"gate": labels}))
    console = pages.inbox(FRAME, [item], None, None, {"acme/r-1": context})
    # Then the page and the console both say each label where the field, or the value, is shown
    for label in labels.values():
        assert label in page
        assert label in console
    drawn = [f.label for form in forms.gate_forms(payload, labels=labels) for f in form.fields]
    shown = approval.artifact_of(payload, labels)
    said = drawn + ([r.label for r in shown.content.rows] if shown and shown.content.rows else [])
    assert any(label in words for label in labels.values() for words in said)


def test_every_gate_type_takes_field_labels_checked_at_registration_as_an_approvals_are():
    from interlude.engine import run as engine
    from tests.support.engine import wf_of

    configs = {
        "core.approvalGate": {"title": "Ship?"},
        "core.clarificationGate": {"questions": [{"id": "po", "question": "Which PO?"}]},
        "core.interrupt": {"kind": "custom", "data": {"customKind": "pay"}},
        "core.confidenceGate": {"agentId": "triage", "observed": 0.4},
        "core.credentialGate": {"provider": "github", "connectUrl": "https://connect.example.com/"},
        "core.conversationGate": {"turn": "start"},
    }
    for type_id, config in configs.items():
        good = wf_of([{"id": "g", "typeId": type_id, "config": {**config, "fieldLabels": {"po": "Purchase order"}}}])
        assert engine.check_config(good) == [], type_id
        for labels in ({"po": ""}, {"po": "x" * 201}, {"po": 7}):
            bad = wf_of([{"id": "g", "typeId": type_id, "config": {**config, "fieldLabels": labels}}])
            assert [p["path"] for p in engine.check_config(bad)] == ["nodes/0/config/fieldLabels/po"], (type_id, labels)


def test_the_services_refusal_is_said_beside_the_field_in_plain_words():
    refused = forms.refusal(RICH_PAYLOAD, "resumeValue does not match the interrupt's resumeSchema", {"field": "resumeValue", "errors": [{"path": "party/name", "message": "'' is too short"}]})
    assert refused.fields == {"f4_0": "This answer is not accepted here."}
    secret = forms.refusal(MODULEX, "an interrupt never accepts credential material", {"field": "resumeValue", "path": "/notes"})
    assert secret.fields == {"f1": forms.CREDENTIAL_WORDS}
    plain = forms.refusal(PAYLOADS["approval"], "action 'refine' requires refineFeedback", {"field": "resumeValue.refineFeedback"})
    assert str(plain) == "Action 'refine' requires the requested changes."


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


def test_a_workflows_declared_inputs_are_asked_and_read_back_with_the_same_form_code():
    variables = [
        Variable.model_validate({"name": "amount", "type": "number", "required": True}),
        Variable.model_validate({"name": "currency", "schema": {"enum": ["EUR", "USD"]}, "defaultValue": "EUR"}),
    ]
    schema = declared_inputs.schema_of(variables)
    drawn = forms.schema_form(schema, None, forms.Button("start", "Start run"))
    assert [(f.name, f.label, f.widget, f.required, f.value) for f in drawn.fields] == [
        ("f0", "amount", "number", True, ""),
        ("f1", "currency (optional)", "select", False, "EUR"),
    ]
    assert forms.value_from_form(schema, {"f0": ["2150"], "f1": ["USD"]}) == {"amount": 2150, "currency": "USD"}
    with pytest.raises(forms.FormError) as refused:
        forms.value_from_form(schema, {"f0": ["lots"], "f1": ["EUR"]})
    assert set(refused.value.fields) == {"f0"}


def test_a_form_naming_two_decisions_decides_neither():
    payload = {"kind": "approval", "key": "k", "data": {"title": "Refund?", "actions": ["accept", "reject"]}}
    assert forms.resume_from_form(payload, {"action": ["reject"]}) == {"action": "reject"}
    for posted in ({"action": ["accept", "reject"]}, {"action": ["accept", "accept"]}, {"action": []}, {}):
        with pytest.raises(forms.FormError, match="Choose one of the buttons"):
            forms.resume_from_form(payload, posted)


@pytest.mark.parametrize("name", [n for n in RICH_ANSWER if n != "f6"])
def test_an_answer_sent_twice_is_said_beside_its_field_never_read_by_its_first_value(name):
    # f6 is check boxes: several values under one name are its answer (test_an_answer_reads_back_as_the_schema_types_it)
    with pytest.raises(forms.FormError) as refused:
        forms.resume_from_form(RICH_PAYLOAD, {**RICH_ANSWER, name: [*RICH_ANSWER[name], *RICH_ANSWER[name]]})
    assert refused.value.fields == {name: "The form sent more than one answer here; give one."}


@pytest.mark.parametrize(
    "posted",
    [
        {"action": ["accept"], "feedback": ["fine", "fine"]},
        {"action": ["refine"], "refine_scope": ["whole", "items"], "refine_text": ["shorter"]},
        {"action": ["refine"], "refine_scope": ["whole"], "refine_text": ["shorter", "longer"]},
        {"action": ["ask"], "feedback": ["why?", ""]},
    ],
)
def test_an_approvals_own_field_sent_twice_refuses_the_form(posted):
    with pytest.raises(Invalid, match="the form sent one of its fields more than once"):
        forms.resume_from_form(PAYLOADS["approval"], posted)
    once = {name: values[:1] for name, values in posted.items()}
    assert forms.resume_from_form(PAYLOADS["approval"], once)["action"] == posted["action"][0]


def test_an_example_pressed_twice_fills_nothing_in():
    payload = {
        "kind": "custom",
        "key": "k",
        "data": {"customKind": MODULEX_INTERRUPT_KIND, "payload": {"examples": ["yes", "no"]}},
        "resumeSchema": {"type": "string"},
    }
    assert forms.example_answer(payload, {"example": ["1"]}).example == "no"
    with pytest.raises(Invalid):
        forms.example_answer(payload, {"example": ["1", "0"]})
