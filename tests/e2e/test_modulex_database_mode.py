"""ModuleX database mode and run rows on the local stack, driven by modulex-python (issue 16, items 1 and 2):
workflows.create/list/list_all/get/update/delete, executions.run(workflow_id=…) and resume(…, workflow_id=…),
list_runs / iter_runs / get_run; and OpenWOP's PUT/GET /workflows/{id} beside them on the same paths."""

from __future__ import annotations

import asyncio
import copy
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from modulex import Modulex
from modulex._exceptions import BadRequestError, NotFoundError, ValidationError

from interlude.local.environment import TABLE_NAME
from tests.support.local_stack import Api, stack_client, tenant_admin_key
from tests.support.modulex_example import worked_example
from tests.support.modulex_sdk import sdk
from tests.support.seeded_runs import seed_runs


async def wait_status(client: Modulex, run_pk: str, status: str) -> dict:
    for _ in range(200):
        detail = await client.executions.get_run(run_pk)
        if detail.status == status:
            return detail
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_pk} never reached {status}")


def test_a_deployed_modulex_workflow_runs_and_resumes_by_id(api: Api) -> None:
    async def scenario() -> None:
        async with sdk(api) as client:
            created = await client.workflows.create(worked_example(), name="Refund approval", tags=["ops"])
            assert created.name == "Refund approval"
            assert created.workflow_schema is not None
            fetched = await client.workflows.get(created.id)
            assert (fetched.id, fetched.tags, fetched.edit_version) == (created.id, ["ops"], 1)

            started = await client.executions.run(workflow_id=created.id, input={"request": "the refund"})
            assert started.workflow_source == "database"
            detail = await wait_status(client, started.run_id, "interrupted")
            assert (detail.workflow_id, detail.input_snapshot) == (created.id, {"request": "the refund"})

            resumed = await client.executions.resume(
                started.thread_id, started.run_id, {"approved": True}, workflow_id=created.id
            )
            assert resumed.workflow_source == "database"
            done = await wait_status(client, started.run_id, "completed")
            assert done.output_summary is not None
            assert done.duration_seconds is not None

            # An update with a new schema is a new version; runs started before keep theirs.
            schema = copy.deepcopy(worked_example())
            schema["metadata"]["name"] = "Refund approval v2"
            updated = await client.workflows.update(created.id, workflow_schema=schema, status="published")
            assert (updated.edit_version, updated.status) == (2, "published")
            assert updated.model_extra["latest_version"] == 2
            renamed = await client.workflows.update(created.id, name="Refunds")
            assert renamed.model_extra["latest_version"] == 2  # no schema, no new version

            listed = [w async for w in client.workflows.list_all()]
            mine = next(w for w in listed if w.id == created.id)
            assert (mine.name, mine.model_extra["face"]) == ("Refunds", "modulex")

            deleted = await client.workflows.delete(created.id)
            assert (deleted.status, deleted.workflow_id) == ("deleted", created.id)
            with pytest.raises(NotFoundError):
                await client.workflows.get(created.id)
            with pytest.raises(BadRequestError):
                await client.executions.run(workflow_id=created.id)
            # The run started from it is still there, with its version.
            assert (await client.executions.get_run(started.run_id)).status == "completed"

    asyncio.run(scenario())


def test_openwop_and_modulex_workflows_share_the_paths(api: Api) -> None:
    openwop_id = api.fixture("conformance-approval")
    async def scenario() -> None:
        async with sdk(api) as client:
            created = await client.workflows.create(worked_example())
            page = await client.workflows.list(page=1, page_size=100)
            faces = {w.id: w.model_extra["face"] for w in page.workflows}
            assert faces[openwop_id] == "openwop"
            assert faces[created.id] == "modulex"
            assert page.total >= 2
            assert page.total_pages == -(-page.total // 100)
            # OpenWOP's GET answers an OpenWOP workflow in its own shape...
            got = api.call("GET", f"/workflows/{openwop_id}")
            assert set(got.json()) == {"workflowId", "version", "definition"}
            # ...and a ModuleX workflow's id in ModuleX's, refusals included.
            got = api.call("GET", f"/workflows/{created.id}")
            assert got.json()["workflow_schema"] == worked_example()
            refused = api.call("PUT", f"/workflows/{created.id}", {"workflow_schema": {"nodes": "no"}})
            assert refused.status_code == 422
            assert "detail" in refused.json()
            # An OpenWOP definition PUT on an OpenWOP id is still a new version.
            again = api.call("PUT", f"/workflows/{openwop_id}", got_definition(api, openwop_id))
            assert again.status_code == 201
            assert again.json()["version"] == 2
            assert api.call("DELETE", f"/workflows/{openwop_id}").status_code == 405
            with pytest.raises(ValidationError):
                # A node type Interlude has no runner for is the ModuleX face's 422.
                await client.workflows.create({"nodes": [{"id": "a", "type": "teleport", "x": 0, "y": 0}]})
            missing = api.call("DELETE", "/workflows/no-such-workflow")
            assert missing.status_code == 404
            assert missing.json() == {"detail": "workflow not found"}

    asyncio.run(scenario())


def got_definition(api: Api, workflow_id: str) -> dict:
    return api.call("GET", f"/workflows/{workflow_id}").json()["definition"]


def test_list_runs_and_iter_runs_page_with_filters(stack_info: dict[str, str]) -> None:
    # A tenant of its own, its runs written as the store writes them (a head and a listing entry each): the subject
    # is the reader (50 runs made through the API cost the stack seconds).
    name = f"mxlist-{uuid.uuid4().hex[:8]}"
    api = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    approval = api.fixture("conformance-approval")
    noop = api.fixture("conformance-noop")
    dynamodb = stack_client(stack_info, "dynamodb")
    began = datetime.now(UTC) - timedelta(minutes=1)
    waiting = seed_runs(dynamodb, TABLE_NAME, name, approval, 30, began, status="waiting-approval")
    done = seed_runs(dynamodb, TABLE_NAME, name, noop, 20, began + timedelta(milliseconds=30))

    async def scenario() -> None:
        async with sdk(api) as client:
            first = await client.executions.list_runs(workflow_id=approval, limit=12)
            assert (len(first.runs), first.has_more, first.limit, first.offset) == (12, True, 12, 0)
            assert all(r.status == "interrupted" for r in first.runs)
            every = [r async for r in client.executions.iter_runs(workflow_id=approval, page_size=7)]
            assert sorted(r.run_id.replace("~2F", "/") for r in every) == sorted(waiting)
            assert [r.created_at for r in every] == sorted((r.created_at for r in every), reverse=True)
            completed = [r async for r in client.executions.iter_runs(workflow_id=noop, status="completed")]
            assert len(completed) == len(done)
            interrupted = await client.executions.list_runs(workflow_id=noop, status="interrupted")
            assert (interrupted.runs, interrupted.has_more) == ([], False)
            detail = await client.executions.get_run(first.runs[0].id)
            assert detail.run_id == first.runs[0].run_id
            assert detail.organization_id == api.tenant
            with pytest.raises(NotFoundError):
                await client.executions.get_run("someone-else~2FAAAAAAAAAAAAAAAAAAAAAAAA")
            with pytest.raises(BadRequestError):
                await client.executions.list_runs(status="sleeping")
            with pytest.raises(BadRequestError, match="at most 1000 runs past"):
                # No page of this listing was read near that deep: a page starts at most 1,000 runs past a bookmark.
                await client.executions.list_runs(workflow_id=approval, offset=2_000, limit=20)

    asyncio.run(scenario())
