#!/usr/bin/env bash
# Builds the core Lambda layer into layers/core/build/python: the runtime dependencies listed in
# pyproject.toml, as wheels for the functions' platform (Linux arm64, CPython 3.12), plus the interlude
# package itself. The CDK stack ships this directory when it exists (see infra/layer.py).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
build="$root/layers/core/build"
target="$build/python"

# The dependency list is read from pyproject.toml so the layer cannot drift from the package metadata.
mapfile -t deps < <("$python" - "$root/pyproject.toml" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as pyproject:
    print("\n".join(tomllib.load(pyproject)["project"]["dependencies"]))
PY
)

rm -rf "$build"
mkdir -p "$target"
# --only-binary: nothing is compiled on this machine; wheels must already exist for the Lambda platform.
# --no-compile: .pyc files from the build host's Python would be useless under 3.12.
"$python" -m pip install \
  --quiet --disable-pip-version-check --no-compile \
  --platform manylinux2014_aarch64 --only-binary=:all: --python-version 3.12 --implementation cp \
  --target "$target" \
  "${deps[@]}"
cp -R "$root/layers/core/python/interlude" "$target/interlude"
find "$target" -name __pycache__ -type d -prune -exec rm -rf {} +

echo "built $target ($(du -sh "$target" | cut -f1))"
