"""Time zones work where the system has no time zone database (the Lambda image need not carry /usr/share/zoneinfo).

A principal without a zone is told deadlines in UTC, which needs no database at all; one with a zone gets it from the
`tzdata` package, a runtime dependency the layer ships. Each case runs in a fresh interpreter whose zoneinfo search
path is an empty directory, so the machine's own database cannot answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

NOON_UTC = 1_795_003_200  # 2026-11-18 12:00 UTC

IN_A_FRESH_INTERPRETER = f"""
import zoneinfo
assert zoneinfo.TZPATH == ({{tzpath!r}},), zoneinfo.TZPATH
from interlude.adapters.notify.messages import deadline_text
from interlude.domain.models.principals import PrincipalEntry
{{code}}
print(deadline_text({NOON_UTC}, entry.timeZone))
"""


def deadline_shown_without_os_database(tmp_path: Path, code: str) -> str:
    empty = tmp_path / "no-zoneinfo"
    empty.mkdir()
    script = IN_A_FRESH_INTERPRETER.format(tzpath=str(empty), code=code)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONTZPATH": str(empty)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_principal_without_a_zone_is_told_in_utc_without_any_database(tmp_path: Path) -> None:
    shown = deadline_shown_without_os_database(tmp_path, "entry = PrincipalEntry(displayName='Ada')")

    assert shown == "Wed 18 Nov 2026, 12:00 UTC"


def test_a_principal_with_a_zone_is_accepted_and_told_in_it_from_the_tzdata_package(tmp_path: Path) -> None:
    # PUT /principals validates the zone by loading it; a notification shows the deadline in it.
    shown = deadline_shown_without_os_database(tmp_path, "entry = PrincipalEntry(timeZone='Asia/Tokyo')")

    assert shown == "Wed 18 Nov 2026, 21:00 (Asia/Tokyo) · 12:00 UTC"
