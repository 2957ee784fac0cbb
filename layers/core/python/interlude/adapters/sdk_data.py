"""The AWS SDK data the layer ships beside botocore: the models of the services the functions call, DynamoDB's cut to
the operations the code calls, minified, with no documentation (ADR 0107).

botocore's loader reads its data from a search path; a session whose loader searches only this copy
(sdk_clients.use_packaged_models) lists six services instead of every service's directory,
parses DynamoDB's model at a tenth of its size and the endpoints of six services instead of all, so a cold start's
first client costs a fraction of what it costs from botocore's own data (bench/client_creation.py).

Written from botocore's own files when the layer is built (layer.build_dependencies, from the botocore installed into
the layer) and never edited by hand; tests/unit/test_sdk_data.py checks that every operation and service the code
calls is in it. Build-time code: no function imports it.
Usage: python -m interlude.adapters.sdk_data OUT_DIR [BOTOCORE_DATA_DIR]
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import botocore

# The directory's name on the layer's path (/opt/python): interlude.sdk_clients looks for it on sys.path.
from interlude.sdk_clients import PACKAGED_MODELS

# The services the functions make clients of (cli/ and local/ are not in the layer's functions' paths).
SERVICES = ("apigatewaymanagementapi", "dynamodb", "s3", "scheduler", "secretsmanager", "sesv2", "sqs")
# The DynamoDB operations the code calls (store/, provisioning included); every other operation is left out.
DYNAMODB_OPERATIONS = frozenset(
    {
        "BatchGetItem",
        "BatchWriteItem",
        "CreateTable",
        "DeleteItem",
        "DescribeTable",
        "GetItem",
        "PutItem",
        "Query",
        "Scan",
        "TransactWriteItems",
        "UpdateItem",
        "UpdateTimeToLive",
    }
)
# What every client reads besides its service's own files.
SHARED = ("_retry.json", "partitions.json", "sdk-default-configuration.json")


def botocore_data() -> Path:
    return Path(botocore.__file__).parent / "data"


def _read(path: Path) -> Any:
    """A botocore data file, plain or gzipped (botocore ships both)."""
    if path.name.endswith(".gz"):
        return json.loads(gzip.decompress(path.read_bytes()))
    return json.loads(path.read_text())


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False))


def _undocumented(model: dict[str, Any]) -> dict[str, Any]:
    """The service model without its documentation strings (read only by botocore's help), which are most of it."""
    for operation in model.get("operations", {}).values():
        operation.pop("documentation", None)
        operation.pop("documentationUrl", None)
    for shape in model.get("shapes", {}).values():
        shape.pop("documentation", None)
        for ref in (*shape.get("members", {}).values(), *(shape[k] for k in ("member", "key", "value") if k in shape)):
            ref.pop("documentation", None)
    model.pop("documentation", None)
    return model


def cut_to(model: dict[str, Any], operations: frozenset[str]) -> dict[str, Any]:
    """The service model with only `operations` and the shapes they reach (inputs, outputs, errors, transitively)."""
    missing = operations - set(model["operations"])
    if missing:
        raise ValueError(f"botocore's model has no operation {sorted(missing)}")
    kept_operations = {name: op for name, op in model["operations"].items() if name in operations}
    reached: set[str] = set()
    pending = [
        ref["shape"]
        for op in kept_operations.values()
        for ref in (op.get("input"), op.get("output"), *op.get("errors", []))
        if ref is not None
    ]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        shape = model["shapes"][name]
        pending += [ref["shape"] for ref in shape.get("members", {}).values()]
        pending += [shape[k]["shape"] for k in ("member", "key", "value") if k in shape]
    shapes = {name: shape for name, shape in model["shapes"].items() if name in reached}
    return {**model, "operations": kept_operations, "shapes": shapes}


def _latest_version(source: Path, service: str) -> Path:
    with_model = [p for p in (source / service).iterdir() if any(p.glob("service-2.json*"))]
    return sorted(with_model)[-1]


def write(out: Path, source: Path | None = None) -> None:
    """Write the packaged data under `out` (replaced whole) from botocore's data directory `source`."""
    source = source or botocore_data()
    if out.exists():
        shutil.rmtree(out)
    for service in SERVICES:
        version = _latest_version(source, service)
        for path in version.iterdir():
            if not path.name.endswith((".json", ".json.gz")) or path.name.startswith("examples-"):
                continue
            name = path.name.removesuffix(".gz")
            data = _read(path)
            if name.startswith("service-2."):
                data = _undocumented(data)
                if service == "dynamodb" and name == "service-2.json":
                    data = cut_to(data, DYNAMODB_OPERATIONS)
            _write(out / service / version.name / name, data)
    for name in SHARED:
        _write(out / name, _read(source / name))
    endpoints = _read(source / "endpoints.json")
    for partition in endpoints["partitions"]:
        partition["services"] = {k: v for k, v in partition["services"].items() if k in SERVICES}
    _write(out / "endpoints.json", endpoints)


def main() -> int:
    args = sys.argv[1:]
    if not args:
        print(__doc__.strip().rsplit("Usage: ", 1)[1], file=sys.stderr)
        return 2
    write(Path(args[0]), Path(args[1]) if len(args) > 1 else None)
    print(f"wrote {args[0]} ({PACKAGED_MODELS}: {', '.join(SERVICES)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
