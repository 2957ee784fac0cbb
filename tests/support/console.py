"""Browser-less console users: requests.Sessions that sign in with an API key and post the pages' forms (`Console` on the
local stack, `Browser` on any base URL, the integration suite's gateway too)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import requests

from interlude.api.console.session import SESSION
from tests.support.local_stack import Api

PROOF = re.compile(r'name="csrf" value="([^"]+)"')
# A workflow whose one step calls a private address the egress guard refuses when it calls (its URL rendered from an
# input: written as it is, the definition would be refused when registered).
REFUSED_AT_THE_CALL = {
    "variables": [{"name": "target", "type": "string", "defaultValue": "https://10.0.0.1/x"}],
    "nodes": [{"id": "call", "typeId": "core.http", "config": {"url": "{{inputs.target}}", "maxAttempts": 1}}],
    "edges": [],
}


# What a browser sends when it opens an address, and what an API client asking for JSON sends.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
JSON = "application/json"


class Browser:
    """A person's browser: it opens addresses and posts forms (never following a redirect), and keeps the cookies it
    is given. The handler marks them Secure where the deployment's base URL is https; served on plain HTTP on loopback
    here, they are sent anyway."""

    def __init__(self, base_url: str, accept: str = BROWSER_ACCEPT) -> None:
        self.base_url = base_url
        self.session = requests.Session()
        self.session.headers["Accept"] = accept

    def send(self, method: str, path: str, form: dict[str, Any] | None = None, **kw: Any) -> requests.Response:
        for cookie in self.session.cookies:
            cookie.secure = False
        return self.session.request(method, self.base_url + path, data=form, allow_redirects=False, timeout=30, **kw)

    def proof(self, path: str) -> str:
        found = PROOF.search(self.send("GET", path, headers={"Accept": BROWSER_ACCEPT}).text)
        assert found, path
        return found.group(1)

    def sign_in(self, key: str) -> requests.Response:
        return self.send("POST", "/console/sign-in", {"csrf": self.proof("/console/sign-in"), "api_key": key})

    def signed_in(self, key: str) -> Browser:
        got = self.sign_in(key)
        assert got.status_code == 200, got.text[:300]
        return self

    def as_api_client(self) -> Browser:
        """This browser's cookies, asking for JSON."""
        client = Browser(self.base_url, JSON)
        client.session.cookies = self.session.cookies
        return client


class Console:
    def __init__(self, api: Api) -> None:
        self.base_url = api.base_url
        self.session = requests.Session()

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.session.get(self.base_url + path, timeout=30, **kw)

    def post(self, path: str, form: dict[str, Any], **kw: Any) -> requests.Response:
        return self.session.post(self.base_url + path, data=form, timeout=30, **kw)

    def proof(self, path: str = "/console/inbox") -> str:
        page = self.get(path)
        found = PROOF.search(page.text)
        assert found, page.text[:500]
        return found.group(1)

    def sign_in(self, key: str) -> requests.Response:
        proof = self.proof("/console/sign-in")
        return self.post("/console/sign-in", {"csrf": proof, "api_key": key}, allow_redirects=False)

    def signed_in(self, key: str) -> Console:
        got = self.sign_in(key)
        assert got.status_code == 200, got.text[:500]
        assert 'http-equiv="refresh" content="0;url=/console/inbox"' in got.text
        return self


def opens_a_session(got: requests.Response) -> bool:
    """Whether the answer sets a console session's cookie (the local stack's: over plain http)."""
    return any(c.startswith(SESSION.name(https=False) + "=") for c in got.raw.headers.getlist("Set-Cookie"))


def gate_workflow(api: Api, **config: Any) -> str:
    workflow_id = f"console-{uuid.uuid4().hex[:8]}"
    definition = {
        "nodes": [
            {
                "id": "review",
                "typeId": "core.approvalGate",
                "config": {"title": "Ship it?", "actions": ["accept", "reject"], **config},
            },
            {"id": "done", "typeId": "core.noop"},
        ],
        "edges": [{"sourceNodeId": "review", "targetNodeId": "done"}],
    }
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return workflow_id


def refund_workflow(api: Api) -> str:
    """A workflow that declares its inputs (a required number, a choice with a default): the Start run form's."""
    workflow_id = f"console-start-{uuid.uuid4().hex[:8]}"
    definition = {
        "name": "Refunds",
        "variables": [
            {"name": "amount", "type": "number", "required": True, "description": "In the order's currency"},
            {"name": "currency", "schema": {"enum": ["EUR", "USD"]}, "defaultValue": "EUR"},
        ],
        "nodes": [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Refund {{inputs.amount}}?"}}],
    }
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return workflow_id


def failed_run(api: Api) -> str:
    """A run failed at its HTTP step: the egress guard refuses its private destination, never dialled."""
    workflow_id = f"console-refused-{uuid.uuid4().hex[:6]}"
    assert api.put_workflow(workflow_id, REFUSED_AT_THE_CALL).status_code == 201
    run_id = api.start(workflow_id)["runId"]
    assert api.wait_status(run_id, {"failed"}, timeout_s=60)["status"] == "failed"
    return run_id
