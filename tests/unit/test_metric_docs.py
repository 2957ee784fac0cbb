"""Every business metric the code counts is named where an operator looks for it: docs/operations.md's list and the
metrics module's own account of what is counted, so a new metric cannot ship unexplained."""

from __future__ import annotations

import re
from pathlib import Path

from interlude.adapters import metrics

ROOT = Path(__file__).resolve().parents[2]
COUNTED = re.compile(r'metrics\.count\(\s*"([A-Za-z]+)"')


def counted_metrics() -> set[str]:
    sources = [*ROOT.glob("layers/core/python/interlude/**/*.py"), *ROOT.glob("functions/*/handler.py")]
    return {name for path in sources for name in COUNTED.findall(path.read_text(encoding="utf-8"))}


def test_the_code_counts_metrics_this_test_can_find():
    # The scan itself: a renamed helper would leave it finding nothing, and the test below passing on nothing.
    assert {"Decisions", "CallbackNotices", "Notifications", "TenantWork"} <= counted_metrics()


def test_every_counted_metric_is_named_in_the_operations_guide_and_the_metrics_module():
    guide = (ROOT / "docs/operations.md").read_text(encoding="utf-8")
    account = metrics.__doc__ or ""
    missing = {
        name: [
            where
            for where, text in (("docs/operations.md", guide), ("adapters/metrics.py", account))
            if f"{name}{{" not in text
        ]
        for name in counted_metrics()
    }
    assert {name: places for name, places in missing.items() if places} == {}
