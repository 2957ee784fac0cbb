"""What every bench shares: an offline AWS environment, counting the AWS calls it makes, and timing what a new instance
pays once in fresh interpreters."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Benches reuse the tests' support modules (fixture paths, the stream reader): the repo root must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def offline_aws(**settings: str) -> None:
    """Fake credentials and no endpoint override, before any client exists: benches run on moto in-process."""
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1", **settings
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)


def movable_clock() -> Path:
    """A clock file of its own, at the real time, that every clock reading of this process follows (the bench moves it
    with `clock.advance` where it plays time passing)."""
    from interlude.domain import clock

    clock_file = Path(tempfile.mkdtemp()) / "clock"
    clock.reset(clock_file)
    os.environ[clock.CLOCK_FILE_ENV] = str(clock_file)
    return clock_file


class Calls:
    """Count calls made through the watched clients (or a whole session), optionally only some services."""

    def __init__(self, *clients: Any, services: tuple[str, ...] | None = None, qualified: bool = False) -> None:
        self.counter: Counter[str] = Counter()
        self.services = services
        self.qualified = qualified
        for client in clients:
            self.watch(client)

    def watch(self, emitter: Any) -> None:
        """A client, or a botocore session (its event emitter) to count every client it makes."""
        events = emitter.meta.events if hasattr(emitter, "meta") else emitter.get_component("event_emitter")
        events.register("before-call", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        if self.services is None or service in self.services:
            self.counter[f"{model.service_model.service_name}:{model.name}" if self.qualified else model.name] += 1

    def take(self) -> Counter[str]:
        taken, self.counter = self.counter, Counter()
        return taken


def fmt(c: Counter[str]) -> str:
    return f"{sum(c.values())} ({', '.join(f'{k}×{v}' for k, v in sorted(c.items())) or '-'})"


def admin_with_approval(services: Any) -> tuple[Any, str, str]:
    """An every-scope admin key of tenant `bench` and the approval fixture registered under its own id:
    (principal, bearer header, workflow id). Imported late: `offline_aws` must run before any client exists."""
    import json

    from interlude import wiring
    from interlude.domain.models.requests import CreateKeyRequest
    from interlude.domain.models.workflow import WorkflowDefinition
    from tests.support.local_stack import FIXTURES

    created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
    bearer = f"Bearer {created['apiKey']}"
    principal = services.keys.authenticate(bearer)
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(principal, definition["id"], WorkflowDefinition.model_validate(definition))
    return principal, bearer, definition["id"]


# A probe program prints, as its last line, [first, second]: CPU seconds by step name on a new instance, then the
# same steps again on it, warm.
Paid = list[dict[str, float]]


def first_and_warm_rounds(program: str, roots: Sequence[Path], rounds: int) -> dict[Path, list[Paid]]:
    """Each round runs `program` (argv[1]: a repository root) in a fresh interpreter per root, the roots alternating
    so their figures come from the same minutes. Modules load from bytecode, as bench/cold_import.py measures: a
    private PYTHONPYCACHEPREFIX, filled by one untimed run of each root first."""
    runs: dict[Path, list[Paid]] = {root: [] for root in roots}
    with tempfile.TemporaryDirectory(prefix="bench-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for root in roots:
            _probe(program, root, env)
        for _ in range(rounds):
            for root in roots:
                runs[root].append(_probe(program, root, env))
    return runs


def _probe(program: str, root: Path, env: dict[str, str]) -> Paid:
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(root / "layers/core/python"), str(root)) if p)}
    out = subprocess.run([sys.executable, "-c", program, str(root)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    result: Paid = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def print_paid_once(
    runs: dict[Path, list[Paid]], what: str, whole: str | None = None, names: dict[Path, str] | None = None
) -> None:
    """Per step: the first's CPU, the warm one's, and the difference (medians over the rounds, ms); `whole`: a line
    for the sum of the steps; `names`: what to call a root instead of its path."""
    print(
        f"rounds={len(next(iter(runs.values())))}; CPU ms, medians: first {what}, second {what}, first - second "
        "(paid once per instance)"
    )
    for root, rounds in runs.items():
        print((names or {}).get(root, str(root)))
        for name in rounds[0][0]:
            first = [r[0][name] * 1000 for r in rounds]
            second = [r[1][name] * 1000 for r in rounds]
            extra = [a - b for a, b in zip(first, second, strict=True)]
            print(
                f"  {name:<22} {statistics.median(first):7.1f} {statistics.median(second):7.1f} "
                f"{statistics.median(extra):+8.1f}"
            )
        if whole:
            total_extra = [sum(r[0].values()) * 1000 - sum(r[1].values()) * 1000 for r in rounds]
            print(f"  {whole:<22} {'':7} {'':7} {statistics.median(total_extra):+8.1f}")


def english_text(size: int, start: int = 0) -> str:
    """`size` characters of English prose, as an approval's text or a brief would hold (the repository's copy of the
    Apache License 2.0, its whitespace folded), from `start`: deflate shrinks it about 2.2 times, as it does such text.
    Repeated filler ("Lorem ipsum …" × 35) would shrink 26 times and hide what a stored copy of a real text costs."""
    prose = " ".join(
        (Path(__file__).resolve().parent.parent / "tests/fixtures/openwop/LICENSE-Apache-2.0.txt").read_text().split()
    )
    if start + size > len(prose):
        raise ValueError(f"the prose holds {len(prose)} characters")
    return prose[start : start + size]
