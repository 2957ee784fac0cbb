"""A browser-less console user: a requests.Session that signs in with an API key and posts the pages' forms."""

from __future__ import annotations

import re
import uuid
from typing import Any

import requests

from tests.support.local_stack import Api

PROOF = re.compile(r'name="csrf" value="([^"]+)"')


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
