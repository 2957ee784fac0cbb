"""Format 12 of the interrupt item (docs/adr/0169): its gate's payload deflated against the gate's node in the workflow
version the run follows.

A gate's payload repeats its node's configuration (an approval's title, description and actions; a form's schema; a
ModuleX message's template, rendered): a 2 KB description is ≈ 840 B deflated on its own in every gate's item, which
makes that item two write units and keeps 840 B per run for the run's retention. The version is stored once and never
changes (a ModuleX workflow deleted keeps its versions: runs still read them), and a run cannot go on without it. So a
format-12 item holds the payload deflated with the node's configuration as zlib's preset dictionary (`payloadAgainst`,
attributes.packed_against): what repeats it costs a few bytes (the bench's 2 KB gate's item: 1,460 → 771 B as billed, docs/adr/0169), what a template
rendered of the run's own data costs what it did. It names its version (`workflowVersion`); the node is its `nodeId`.

Every read of an interrupt item puts the payload back (`fill`) before anyone sees it: as a `payload` attribute holding
its JSON text (attributes.unpacked reads it as it reads a deflated one), so what reads a format-3 item reads this one
unchanged. zlib checks the dictionary it is handed against the one the stream was made with (its DICTID), so a wrong
one is refused, never read.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any
from weakref import WeakKeyDictionary

from interlude import wiring
from interlude.domain.errors import Internal
from interlude.domain.ids import tenant_of
from interlude.store import attributes as a
from interlude.store.layout import workflow_pk, workflow_version_sk
from interlude.store.table import BATCH_GET_MAX, batch_get

PAYLOAD = "payload"
PAYLOAD_AGAINST = "payloadAgainst"
WORKFLOW_VERSION = "workflowVersion"
# A node configuration shorter than this is not worth a definition read on a cold instance: a gate whose node says
# this little is written in format 3, its payload deflated alone.
DICTIONARY_MIN = 256
# Versions whose nodes' dictionaries a client's cache keeps (a page lists gates of a few workflows).
VERSIONS_KEPT = 256

Version = tuple[str, str, str, int]  # (table, tenant, workflow id, version)
Dictionaries = dict[str, bytes]  # node id → its configuration as canonical JSON

# By client (a test's moto world, or the process's one client in a function): a version's dictionaries, read once.
# Kept with the client, not the process: a table created again under the same name (a test's) holds other versions.
_known: WeakKeyDictionary[Any, dict[Version, Dictionaries]] = WeakKeyDictionary()


def node_dictionaries(definition: Mapping[str, Any]) -> Dictionaries:
    """Each node's configuration as canonical JSON (sorted keys, compact, UTF-8), which the writer and every reader
    make alike from the stored definition: the dictionary a gate of that node is deflated against."""
    out: Dictionaries = {}
    for node in definition.get("nodes") or []:
        if isinstance(node, Mapping) and isinstance(node.get("id"), str) and isinstance(node.get("config"), Mapping):
            text = json.dumps(
                node["config"], sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
            out[node["id"]] = text.encode()
    return out


def dictionary(client: Any, table: str, tenant: str, workflow_id: str, version: int, node_id: str) -> bytes | None:
    """The dictionary a new gate of `node_id` is written against; None: its node says too little (format 3)."""
    wanted = (table, tenant, workflow_id, version)
    found = _dictionaries(client, table, {wanted})[0].get(wanted, {}).get(node_id)
    return found if found is not None and len(found) >= DICTIONARY_MIN else None


def payload_attributes(payload: Any, against: bytes | None) -> a.Item:
    """The item attributes that hold `payload`: deflated against `against` (format 12), or alone."""
    return (
        {PAYLOAD_AGAINST: a.packed_against(payload, against)} if against is not None else {PAYLOAD: a.packed(payload)}
    )


def fill(client: Any, table: str, items: Iterable[a.Item]) -> int:
    """Put back (in place) the payload of every format-12 interrupt item among `items` (items of other kinds, and
    interrupt items that hold theirs, are left as they are), reading the versions not yet known in one BatchGetItem;
    the calls it made."""
    held = [item for item in items if PAYLOAD_AGAINST in item and PAYLOAD not in item]
    if not held:
        return 0
    found, calls = _dictionaries(client, table, {item_version(table, item) for item in held})
    for item in held:
        version = item_version(table, item)
        item[PAYLOAD] = {"S": _inflated(found.get(version, {}), version, item)}
    return calls


def plain_payload(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (an interrupt item read plain, after `fill`) with its payload parsed, and nothing of format 12 besides."""
    doc.pop(PAYLOAD_AGAINST, None)
    if isinstance(payload := doc.get(PAYLOAD), str):
        doc[PAYLOAD] = json.loads(payload)
    return doc


# What an item read with a projection must ask for, besides its payload, for `fill` to put it back.
FILL_NEEDS = ("runId", "workflowId", WORKFLOW_VERSION, "nodeId", PAYLOAD_AGAINST)


def item_version(table: str, item: a.Item) -> Version:
    if any(name not in item for name in FILL_NEEDS):
        raise Internal(
            "an interrupt item in format 12 was read without what its payload is put back from",
            {"needs": list(FILL_NEEDS)},
            code="interlude.gate_payload_unreadable",
        )
    return table, tenant_of(item["runId"]["S"]), item["workflowId"]["S"], int(item[WORKFLOW_VERSION]["N"])


def _inflated(dictionaries: Dictionaries, version: Version, item: a.Item) -> str:
    node = item["nodeId"]["S"]
    against = dictionaries.get(node)
    if against is None:
        raise Internal(
            f"the interrupt item of node {node!r} is deflated against its workflow version, which holds no such node",
            {"workflowId": version[2], "version": version[3]},
            code="interlude.gate_payload_unreadable",
        )
    try:
        inflater = zlib.decompressobj(zdict=against)
        return (inflater.decompress(base64.b64decode(item[PAYLOAD_AGAINST]["S"])) + inflater.flush()).decode()
    except zlib.error as exc:
        raise Internal(
            f"the interrupt item of node {node!r} does not read against its workflow version's node: {exc}",
            {"workflowId": version[2], "version": version[3]},
            code="interlude.gate_payload_unreadable",
        ) from exc


def _dictionaries(client: Any, table: str, versions: set[Version]) -> tuple[dict[Version, Dictionaries], int]:
    """`versions`' node dictionaries (a version not found left out), and the calls made: those this client read before,
    the rest read now, strongly consistent (one BatchGetItem per 100), and kept. A version not found is not remembered:
    a ModuleX run is registered and started in one request, and its gate read back by another instance a moment later.
    What a caller uses is what this returns, never the cache again: dispatch's threads share it, and one may clear it
    meanwhile (VERSIONS_KEPT)."""
    known = _known.setdefault(client, {})
    found = {version: held for version in versions if (held := known.get(version)) is not None}
    missing = [version for version in versions if version not in found]
    if not missing:
        return found, 0
    keys = [a.key(workflow_pk(tenant, wf), workflow_version_sk(v)) for _, tenant, wf, v in missing]
    got = {
        (item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"]): item
        for item in batch_get(
            client, table, keys, ConsistentRead=True, ProjectionExpression="pk, sk, #d", ExpressionAttributeNames={"#d": "definition"}
        )
    }
    if len(known) + len(missing) > VERSIONS_KEPT:
        known.clear()
    for version, key in zip(missing, keys, strict=True):
        if item := got.get((key[wiring.PARTITION_KEY]["S"], key[wiring.SORT_KEY]["S"])):
            found[version] = known[version] = node_dictionaries(a.unpacked(item["definition"]))
    return found, -(-len(keys) // BATCH_GET_MAX)

