"""The CLI's HTTP client: which deployment (`--url/--key`, `INTERLUDE_URL` / `INTERLUDE_API_KEY`, else the running
local stack's state file), one request at a time, and every refusal as one line (`CliError`), never a traceback."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlude.cli.local import add_state_file_arg
from interlude.config.local import cli_settings
from interlude.domain.ids import INLINE_WORKFLOW_PREFIX, to_wire
from interlude.faces.modulex.references import modulex_id

TIMEOUT_S = 30
MAX_CELL = 48


class CliError(Exception):
    """What the command prints as its one line (`interlude: …`) before exiting 1."""


class Refused(CliError):
    """The API refused the request: its status and its answer's OpenWOP envelope (empty when it sent none)."""

    def __init__(self, status: int, raw: bytes) -> None:
        super().__init__(refusal_line(status, raw))
        self.status = status
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        self.envelope: dict[str, Any] = answer if isinstance(answer, dict) else {}

    @property
    def field(self) -> Any:
        details = self.envelope.get("details")
        return details.get("field") if isinstance(details, dict) else None


def count_between(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a whole number from `low` to `high`, refused as that range (argparse's `choices` would list
    every number in it)."""

    def count(text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number from {low} to {high}")
        return value

    return count


def add_endpoint_args(parser: argparse.ArgumentParser, scope: str | None = None) -> None:
    """--url/--key/--state-file/--json of a command that is a client of the API; `scope`: the one its key needs."""
    parser.add_argument("--url", help="base URL (default: $INTERLUDE_URL, else the local stack's)")
    needs = f" with {scope}" if scope else ""
    parser.add_argument("--key", help=f"API key{needs} (default: $INTERLUDE_API_KEY, else the local stack's)")
    add_state_file_arg(parser)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


class Client:
    def __init__(self, url: str, key: str) -> None:
        self.url = url.rstrip("/")
        self.key = key

    @classmethod
    def of(cls, args: argparse.Namespace) -> Client:
        shell = cli_settings()
        url = args.url or shell.url
        key = args.key or shell.api_key
        state = Path(args.state_file)
        if not (url and key) and state.exists():
            try:
                saved = json.loads(state.read_text())
            except (OSError, ValueError):
                saved = None
            if not isinstance(saved, dict):
                raise CliError(f"{state} is not a local stack's state file")
            url, key = url or saved.get("baseUrl"), key or saved.get("apiKey")
        if not (url and key):
            raise CliError("give --url and --key (or INTERLUDE_URL / INTERLUDE_API_KEY, or run `make dev`)")
        return cls(url, key)

    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        """The answer's JSON; a refusal or an unreachable host raises CliError with the server's own words."""
        params = {k: str(v) for k, v in (query or {}).items() if v is not None}
        target = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.key}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(target, data=data, method=method, headers=headers)
        try:
            # The operator's own deployment (or the local stack): the URL is theirs to choose.
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise Refused(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CliError(f"cannot reach {self.url}: {reason}") from None
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise CliError(f"{method} {path}: the answer is not JSON") from None


def refusal_line(status: int, raw: bytes) -> str:
    """`404 not_found: no such run` from an OpenWOP envelope, `404: workflow not found` from ModuleX's `{detail}`."""
    try:
        body = json.loads(raw)
    except ValueError:
        return f"{status}: {raw.decode(errors='replace')[:200]}"
    if isinstance(body, dict) and "error" in body:
        line = f"{status} {body['error']}: {body.get('message', '')}"
        details = body.get("details")
        if isinstance(details, dict) and details.get("errors"):
            line += " — " + "; ".join(_problem(p) for p in details["errors"][:5])
        return line
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        if isinstance(detail, list):
            detail = "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
        return f"{status}: {detail}"
    return f"{status}: {json.dumps(body)[:200]}"


def _problem(problem: Any) -> str:
    if isinstance(problem, dict):
        where = problem.get("path") or ".".join(str(p) for p in problem.get("loc", []))
        return f"{where}: {problem.get('message') or problem.get('msg')}" if where else str(problem.get("message"))
    return str(problem)


class StepIds:
    """The node ids a table shows: a ModuleX workflow's as their author wrote them (`node_approval`; the API names
    them by the engine's escaped ids, `node~5Fapproval`), any other workflow's as they are; and each workflow by its
    name. A workflow is asked once (`GET /workflows/{id}`: its name, and a ModuleX workflow's `workflow_schema`);
    an inline definition is a ModuleX one with no name."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._workflows: dict[str, dict[str, Any]] = {}

    def of(self, workflow_id: str, node_id: Any) -> Any:
        if not isinstance(node_id, str) or "~" not in node_id:
            return node_id  # nothing escaped: the id is as written whatever the face
        return modulex_id(node_id) if self.modulex(workflow_id) else node_id

    def modulex(self, workflow_id: str) -> bool:
        return workflow_id.startswith(INLINE_WORKFLOW_PREFIX) or "workflow_schema" in self._workflow(workflow_id)

    def workflow(self, workflow_id: str) -> str:
        """The workflow as a table names it: its name, else its id."""
        if workflow_id.startswith(INLINE_WORKFLOW_PREFIX):
            return "an unnamed workflow"
        answer = self._workflow(workflow_id)
        # A ModuleX workflow's record names it; an OpenWOP workflow's latest definition does.
        name = answer.get("name") or (answer.get("definition") or {}).get("name")
        return name if isinstance(name, str) and name else workflow_id

    def _workflow(self, workflow_id: str) -> dict[str, Any]:
        if workflow_id not in self._workflows:
            try:
                answer = self.client.call("GET", f"/workflows/{segment(workflow_id)}")
            except CliError:
                answer = {}  # not readable with this key: named and shown as the API names it
            self._workflows[workflow_id] = answer if isinstance(answer, dict) else {}
        return self._workflows[workflow_id]


class DisplayNames:
    """People as a table names them: a subject's display name in the tenant's directory (GET /principals/{id}), asked
    once per subject; the subject itself where the directory has no name for it or the key may not read it
    (keys:admin)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._names: dict[str, str | None] = {}

    def of(self, subject: Any) -> str | None:
        if not isinstance(subject, str) or not subject:
            return None
        if subject not in self._names:
            try:
                entry = self.client.call("GET", f"/principals/{segment(subject)}")
            except CliError:
                entry = {}
            self._names[subject] = entry.get("displayName") or subject
        return self._names[subject]


def wire(run_id: str) -> str:
    """A run id as one path segment (a wire-form id is kept as it is)."""
    return segment(run_id) if "/" not in run_id else to_wire(run_id)


def segment(value: str) -> str:
    """A command's argument as one path segment, whatever it holds (`?`, `#`, `/..` name nothing else)."""
    return urllib.parse.quote(value, safe="")


def cell(value: Any) -> str:
    text = " ".join(str("-" if value is None else value).split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(headers: tuple[str, ...], rows: list[tuple[Any, ...]], empty: str) -> str:
    """Columns padded to their widest cell; `empty` under the headers when there are no rows."""
    cells = [tuple(cell(c) for c in row) for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    if not rows:
        lines.append(empty)
    return "\n".join(lines)


def printed(args: argparse.Namespace, answer: Any, human: str) -> int:
    print(json.dumps(answer, indent=2) if args.json else human)
    return 0


def run_call(client: Client, method: str, run: str, below: str = "", body: Any = None) -> Any:
    """A call on the run `run` names (`below`: a path under it); an id that names no run of the tenant, whether
    none has it (404 on the run itself) or none could (the API's 400 on its form), says so in words."""
    try:
        return client.call(method, f"/runs/{wire(run)}{below}", body)
    except Refused as refused:
        if refused.field == "runId" or (refused.status == 404 and below in ("", "/cancel", ":fork", ":redrive")):
            shown = run.replace("~2F", "/")
            tenant, slash, _ = shown.partition("/")
            raise CliError(f"no run {shown} in tenant {tenant}" if slash else f"no run {shown}: a run id reads tenant/id") from None
        raise
