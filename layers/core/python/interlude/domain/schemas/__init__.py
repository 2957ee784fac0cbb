"""OpenWOP v2 JSON Schemas (Apache-2.0, copied verbatim from the OpenWOP specification's schemas/v2) and validators over them.

The copies ship inside the Lambda layer; the licence is beside them (LICENSE-openwop-Apache-2.0.txt).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from referencing import Registry

# jsonschema and referencing load on first use, inside the functions below: most cold starts validate nothing
# before their first request, and they were a third of a function's import time.

SCHEMA_FILES = (
    "configurable.schema.json",
    "effect-ledger-projection.schema.json",
    "error-envelope.schema.json",
    "ids.schema.json",
    "run-event-payloads.interrupt-extract.schema.json",
    "run-event.schema.json",
    "run-options.schema.json",
    "run-snapshot.schema.json",
    "subject.schema.json",
    "suspend-request.schema.json",
    # Issue 14: a webhook subscription's delivery body and its dead-letter page.
    "webhook-delivery.schema.json",
    "webhook-dead-letter-page.schema.json",
    # Issue 28: an edge and its condition (engine/conditions.py follows it).
    "workflow-definition.edge-extract.schema.json",
    # Issue 29: diffRun's answer (copied from openwop/openwop-sdks, as docs/adr/0108 says).
    "run-diff-response.schema.json",
)
BASE_URI = "https://openwop.dev/spec/v2/"


def load(name: str) -> dict[str, Any]:
    schema = json.loads(resources.files(__package__).joinpath("v2", name).read_text())
    if name == "run-event.schema.json":
        # Published defect: `type` is oneOf [registered enum, vendor pattern], and every registered name
        # also matches the vendor pattern, so no registered event could validate. Read it as anyOf
        # (docs/adr/0001, "Schema defects").
        schema["properties"]["type"]["anyOf"] = schema["properties"]["type"].pop("oneOf")
    return schema


@cache
def registry() -> Registry:
    from referencing import Registry, Resource

    # Relative $refs ("ids.schema.json#/...") resolve against the sibling copies.
    pairs = []
    for name in SCHEMA_FILES:
        resource = Resource.from_contents(load(name))
        pairs.append((BASE_URI + name, resource))
        if resource_id := resource.id():
            pairs.append((resource_id, resource))
    return Registry().with_resources(pairs)


@cache
def validator(name: str, pointer: str = "") -> Draft202012Validator:
    """A validator for a whole schema file, or for one of its $defs via a JSON pointer like '/$defs/runStarted'."""
    from jsonschema import Draft202012Validator

    schema: dict[str, Any] = {"$ref": BASE_URI + name + ("#" + pointer if pointer else "")}
    return Draft202012Validator(schema, registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER)


PAYLOADS = "run-event-payloads.interrupt-extract.schema.json"


@cache
def payload_validator(event_type: str) -> Draft202012Validator | None:
    index = load(PAYLOADS)["_typeIndex"]["properties"]
    entry = index.get(event_type)
    if entry is None:
        return None
    return validator(PAYLOADS, entry["$ref"].lstrip("#"))


def errors_of(validator_: Draft202012Validator, instance: Any) -> list[dict[str, str]]:
    """Validation failures as {path, message} pairs, first by path, for `details`."""
    out = []
    for err in sorted(validator_.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        path = "/".join(str(p) for p in err.absolute_path)
        out.append({"path": path, "message": err.message[:300]})
    return out
