"""Refresh tests/upgrade/previous/ from a release's git tag (issue 30, item 3): the release's package and a table its
own local stack wrote, which tests/integration/test_upgrade.py upgrades from and rolls back to.

    .venv/bin/python scripts/refresh_upgrade_dump.py [--release vX.Y.Z]

Without --release: the newest vX.Y.Z tag older than this checkout's version (interlude.__version__). Run it when a
release is tagged, from a clone that has its tags (`git fetch --tags`): the test itself needs neither git nor tags, so
a shallow CI clone runs it from what is committed here.

  interlude.tar.gz   `git archive` of the tag's layers/core/python/interlude and functions/ (what its local stack runs)
  table.json.gz      tests/upgrade/previous_release.py `write`, run with that package first on PYTHONPATH: the
                     release's tables (`items`; `entriesItems`, the second table's, from a release that has one)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS = ROOT / "tests" / "upgrade" / "previous"
WRITER = ROOT / "tests" / "upgrade" / "previous_release.py"
RELEASE_TAG = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")
ARCHIVED = ("layers/core/python/interlude", "functions")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def version_of(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def previous_tag() -> str:
    sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))
    from interlude import __version__

    current = version_of(__version__)
    tags = [t for t in git("tag", "--list", "v*").split() if RELEASE_TAG.match(t) and version_of(t[1:]) < current]
    if not tags:
        sys.exit(f"no release tag older than {__version__}: fetch the tags (git fetch --tags) or name one with --release")
    return max(tags, key=lambda t: version_of(t[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", help="the tag to refresh from (default: the newest release before this one)")
    tag = parser.parse_args().release or previous_tag()
    work = Path(tempfile.mkdtemp(prefix="interlude-upgrade-"))
    tree = work / "tree"
    try:
        git("worktree", "add", "--detach", str(tree), tag)
        PREVIOUS.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar.gz", tag, *ARCHIVED], cwd=ROOT, check=True, capture_output=True
        )
        (PREVIOUS / "interlude.tar.gz").write_bytes(archive.stdout)
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree / "layers" / "core" / "python"), "HOME": str(work)}
        subprocess.run([sys.executable, str(WRITER), "write", str(PREVIOUS / "table.json.gz")], cwd=tree, env=env, check=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"tests/upgrade/previous/ refreshed from {tag}")


if __name__ == "__main__":
    main()
