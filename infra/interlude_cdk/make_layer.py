"""`make layer`: build the locked dependencies into layers/core/build and print the layer's size, bytecode and lock."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from interlude_cdk.layer import (
    BYTECODE,
    DEFAULT_BUILD_DIR,
    INTERLUDE_DIR,
    LOCK_FILE,
    PLATFORM,
    PYTHON_VERSION,
    LayerBuildError,
    build_dependencies,
    lock_sha256,
)


def _tree_size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def main() -> int:
    """`make layer`: build the dependencies into layers/core/build and say what was built."""
    started = time.monotonic()
    try:
        compiled = build_dependencies(DEFAULT_BUILD_DIR)
    except LayerBuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    size_mib = _tree_size(DEFAULT_BUILD_DIR) / 2**20
    package_mib = _tree_size(INTERLUDE_DIR) / 2**20
    print(f"built {DEFAULT_BUILD_DIR}: dependencies {size_mib:.1f} MiB unzipped (+ interlude {package_mib:.1f} MiB)")
    print(f"lock {LOCK_FILE.name} sha256 {lock_sha256()} (python {PYTHON_VERSION}, {PLATFORM})")
    print(
        f"bytecode: {compiled.files} files compiled by Python {compiled.python} ({compiled.cache_tag}, "
        f"{BYTECODE.split()[-1]}; install and compile took {seconds:.0f} s)"
    )
    for path, message in compiled.not_python:
        print(f"  not compiled (bytecode.NOT_PYTHON): {path}: {message}")
    print("synthesize or deploy with: -c layerDir=layers/core/build")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
