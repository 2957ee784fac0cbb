"""Start the whole service on this machine: `make dev` / `interlude dev`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from interlude import config, wiring
from interlude.config.delivery import PUBLIC_BASE_URL_ENV
from interlude.config.local import export
from interlude.domain import clock
from interlude.domain.models.requests import CreateKeyRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.buckets import create_local_buckets
from interlude.local.control import ControlApi
from interlude.local.environment import ENTRIES_TABLE_NAME, TABLE_NAME, configure_environment
from interlude.local.http_gateway import Gateway
from interlude.local.keyring import prepare_local_key_ring
from interlude.local.lambda_api import LambdaApi
from interlude.local.lambda_runtime import invoke, run_process_hook
from interlude.local.live_gateway import LiveGateway
from interlude.local.mailbox import verify_local_sender
from interlude.local.moto_server import LockedMotoServer
from interlude.local.pump import Pump, quiesce
from interlude.local.pumps import StreamPump
from interlude.local.recurring import RecurringPump
from interlude.local.schedules import SchedulePump, create_local_deadline_resources
from interlude.local.sqs_pump import QueuePump, create_queues, export_queue_urls, start_queue_pumps
from interlude.local.ttl import TtlPump
from interlude.store.facade import Store
from interlude.store.provisioning import create_tables

DEMO_TENANT = "demo"

DEMO_WORKFLOW: dict[str, Any] = {
    "name": "Publish a post after approval",
    "description": "Drafts a post from the run's inputs, asks an editor, then publishes or files the rejection.",
    "nodes": [
        {
            "id": "draft",
            "typeId": "core.transform",
            "config": {"outputs": {"title": "{{inputs.title}}", "body": "Draft about {{inputs.title}}"}},
        },
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "config": {
                "title": "Publish '{{draft.title}}'?",
                "description": "{{draft.body}}",
                "actions": ["accept", "reject"],
            },
        },
        {
            "id": "publish",
            "typeId": "core.transform",
            "config": {"outputs": {"published": "{{draft.title}}", "by": "{{review.decidedBy}}"}},
        },
        {"id": "file-rejection", "typeId": "core.noop"},
    ],
    "edges": [
        {"id": "draft-review", "sourceNodeId": "draft", "targetNodeId": "review"},
        {"id": "review-publish", "sourceNodeId": "review", "targetNodeId": "publish", "triggerRule": "all_success"},
        {
            "id": "review-reject",
            "sourceNodeId": "review",
            "targetNodeId": "file-rejection",
            "triggerRule": "any_failed",
        },
    ],
    "variables": [{"name": "title", "type": "string", "defaultValue": "Hello, Interlude"}],
}


@dataclass
class LocalInfo:
    base_url: str
    tenant: str
    api_key: str
    moto_endpoint: str
    clock_file: str = ""
    # The operator surface's Lambda Invoke API (interlude.local.lambda_api): `interlude tenants --local` calls it.
    lambda_endpoint: str = ""
    # The control endpoint (interlude.local.control): a test asks it whether the stack is quiet.
    control_endpoint: str = ""
    # The WebSocket API on which clients follow runs live (interlude.local.live_gateway).
    live_url: str = ""

    def as_json(self) -> dict[str, str]:
        return {
            "baseUrl": self.base_url,
            "tenant": self.tenant,
            "apiKey": self.api_key,
            "motoEndpoint": self.moto_endpoint,
            "clockFile": self.clock_file,
            "lambdaEndpoint": self.lambda_endpoint,
            "controlEndpoint": self.control_endpoint,
            "liveUrl": self.live_url,
        }


class LocalStack:
    def __init__(
        self, port: int = 8080, moto_port: int = 0, verbose: bool = False, clock_file: Path | None = None
    ) -> None:
        # The process clock's offset file (interlude.domain.clock): `interlude clock advance` moves it forward.
        self.clock_file = clock_file
        self.port = port
        self.moto_port = moto_port
        self.verbose = verbose
        self.moto: LockedMotoServer | None = None
        self.gateway: Gateway | None = None
        self.live: LiveGateway | None = None
        self.pump: StreamPump | None = None
        self.schedule_pump: SchedulePump | None = None
        self.recurring_pumps: list[RecurringPump] = []
        self.ttl_pump: TtlPump | None = None
        self.queue_pumps: list[QueuePump] = []
        self.lambda_api: LambdaApi | None = None
        self.control: ControlApi | None = None
        self.info: LocalInfo | None = None

    def start(self) -> LocalInfo:
        run_process_hook()
        self.moto = LockedMotoServer(self.moto_port).start()
        configure_environment(self.moto.endpoint, TABLE_NAME, ENTRIES_TABLE_NAME)
        create_tables(boto3.client("dynamodb"), TABLE_NAME, ENTRIES_TABLE_NAME)
        export(prepare_local_key_ring())
        export(create_local_buckets())
        export(create_local_deadline_resources())
        export(verify_local_sender())
        queue_urls = create_queues(boto3.client("sqs"), TABLE_NAME)
        export_queue_urls(queue_urls)
        if self.clock_file is not None:
            clock.reset(self.clock_file)
            export({clock.CLOCK_FILE_ENV: str(self.clock_file)})
        api_key = seed(Store(TABLE_NAME, ENTRIES_TABLE_NAME))
        # Links in callback notices point at this stack: its port is known once the gateway is bound.
        self.gateway = Gateway(self.port, self.verbose)
        export({PUBLIC_BASE_URL_ENV: self.gateway.base_url})
        # The WebSocket API's connections go to the gateway's api instances; its management endpoint is where every
        # function sends to them (bound now, so each function's environment has it from its start).
        self.live = LiveGateway(self._invoke_api)
        export({wiring.LIVE_API.endpoint_env: self.live.endpoint})
        # The environment is complete: what the seed read is read again from it, as a new instance would.
        config.forget()
        self.queue_pumps = start_queue_pumps(queue_urls, self.moto.next_visible)
        # As each deploy does: the first turn of the table's migrations, which the queue's pump then takes.
        invoke(wiring.DEPLOY_TRIGGER, {})
        self.pump = StreamPump(TABLE_NAME).start()
        self.schedule_pump = SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).start()
        self.recurring_pumps = [RecurringPump(schedule).start() for schedule in wiring.RECURRING_SCHEDULES]
        # DynamoDB's TTL, played on the process clock (finished runs expire: issue 30 item 4).
        self.ttl_pump = TtlPump(TABLE_NAME, ENTRIES_TABLE_NAME).start()
        self.gateway.start()
        self.live.start()
        self.lambda_api = LambdaApi().start()
        self.control = ControlApi(self.quiesce).start()
        self.info = LocalInfo(
            self.gateway.base_url,
            DEMO_TENANT,
            api_key,
            self.moto.endpoint,
            str(self.clock_file or ""),
            self.lambda_api.endpoint,
            self.control.endpoint,
            self.live.url,
        )
        return self.info

    def _invoke_api(self, event: dict[str, Any]) -> Any:
        assert self.gateway is not None
        assert self.gateway.server.instances is not None
        return self.gateway.server.instances.invoke(event)

    def quiesce(self, timeout_s: float) -> None:
        """Return once every effect of what the stack was asked before has landed: the stream, queue and schedule
        pumps have each completed a poll begun after the call that found nothing to move (pump.quiesce). The TTL
        sweep and the recurring schedules run on their clocks' periods and are not waited for."""
        pumps: list[Pump] = [p for p in (self.pump, self.schedule_pump) if p is not None]
        quiesce([*pumps, *self.queue_pumps], timeout_s)

    def stop(self) -> None:
        for part in (self.control, self.lambda_api, self.live, self.gateway, *self.queue_pumps, *self.recurring_pumps, self.ttl_pump, self.schedule_pump, self.pump, self.moto):
            if part is not None:
                part.stop()


def seed(store: Store) -> str:
    """A demo tenant: an admin key holding every scope, and the demo approval workflow."""
    from interlude.composition import Services

    services = Services(store)
    admin = services.keys.issue_key(DEMO_TENANT, CreateKeyRequest(subjectId="demo-admin", scopes=list(wiring.ALL_SCOPES)))
    principal = services.keys.authenticate(f"Bearer {admin['apiKey']}")
    services.workflows.put_workflow(principal, "demo-approval", WorkflowDefinition.model_validate(DEMO_WORKFLOW))
    return admin["apiKey"]


def write_state_file(info: LocalInfo, path: Path) -> None:
    # Written whole, then renamed into place: a script polling for the file never reads half of it.
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(info.as_json(), indent=2) + "\n")
    partial.chmod(0o600)
    partial.replace(path)
