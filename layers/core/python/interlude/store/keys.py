"""Keys of the run partition, shared by the store's modules (store/dynamo.py documents the layout)."""

from __future__ import annotations


def run_pk(run_id: str) -> str:
    tenant, opaque = run_id.split("/", 1)
    return f"T#{tenant}#R#{opaque}"


INTERRUPT_SK_PREFIX = "I#"


def interrupt_sk(key: str) -> str:
    return f"{INTERRUPT_SK_PREFIX}{key}"
