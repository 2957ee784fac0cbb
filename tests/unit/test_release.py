"""Issue 30 item 3: a release is named once (interlude.__version__) and everywhere it shows: the package, discovery,
`interlude --version`, the changelog's newest entry; and the upgrade test upgrades from the release just before it."""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path

import pytest

from interlude import __version__
from interlude.api.runs import capabilities
from interlude.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"^## (\d+)\.(\d+)\.(\d+) — ", re.MULTILINE)
PREVIOUS = ROOT / "tests" / "upgrade" / "previous"


def changelog_versions() -> list[tuple[int, int, int]]:
    return [(int(a), int(b), int(c)) for a, b, c in ENTRY.findall((ROOT / "CHANGELOG.md").read_text())]


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_version_is_semantic_and_shown_by_the_cli_and_discovery(capsys, monkeypatch) -> None:
    monkeypatch.setenv("TABLE_NAME", "discovery-reads-no-table")  # settings are read; the table is not
    monkeypatch.setenv("ENTRIES_TABLE_NAME", "discovery-reads-no-table-entries")
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert (done.value.code, capsys.readouterr().out.strip()) == (0, f"interlude {__version__}")
    assert capabilities()["implementation"] == {"name": "interlude", "version": __version__}


def test_every_release_has_a_changelog_entry_newest_first_this_one_on_top() -> None:
    versions = changelog_versions()
    assert versions[0] == version(__version__)
    assert versions == sorted(set(versions), reverse=True)


def test_the_upgrade_test_starts_from_the_release_just_before_this_one() -> None:
    previous = max(v for v in changelog_versions() if v < version(__version__))
    written_by = json.loads(gzip.decompress((PREVIOUS / "table.json.gz").read_bytes()))["release"]
    with tarfile.open(PREVIOUS / "interlude.tar.gz") as archive:
        init = archive.extractfile("layers/core/python/interlude/__init__.py")
        assert init is not None
        packaged = re.search(r'__version__ = "([^"]+)"', init.read().decode())
    assert packaged is not None
    # A release tagged since: `scripts/refresh_upgrade_dump.py` brings its package and a table it wrote here.
    assert version(written_by) == version(packaged[1]) == previous
