"""Print the table's key layout, as interlude/store/layout.py declares it, into docs/scale.md.

The block between `<!-- layout:keys -->` and `<!-- /layout:keys -->` is replaced whole (nothing between the markers
is written by hand); tests/unit/test_key_layout_docs.py checks it equals what the code says.

Usage: .venv/bin/python scripts/key_layout.py [--write]   (without --write: print the block)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from interlude.store import layout

DOC = Path(__file__).resolve().parents[1] / "docs" / "scale.md"
MARKERS = re.compile(r"(<!-- layout:keys -->\n).*?(<!-- /layout:keys -->)", re.S)


def block() -> str:
    """layout.py's item table (its docstring from `Item layout` to the paragraph after it), as a fenced block."""
    lines = (layout.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Item layout"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" "))
    return "```text\n" + "\n".join(lines[start:end]).rstrip() + "\n```\n"


def written(doc: str) -> str | None:
    """The block docs/scale.md holds between its markers; None without them."""
    found = MARKERS.search(doc)
    return None if found is None else doc[found.end(1) : found.start(2)]


def main() -> int:
    if "--write" not in sys.argv[1:]:
        print(block(), end="")
        return 0
    doc = DOC.read_text()
    if written(doc) is None:
        print(f"{DOC} has no <!-- layout:keys --> markers", file=sys.stderr)
        return 1
    DOC.write_text(MARKERS.sub(lambda m: m.group(1) + block() + m.group(2), doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
