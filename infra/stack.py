"""InterludeStack: composes the constructs; every resource is decided by interlude.wiring."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.alarms import DeadLetterAlarms
from infra.api import HttpFront
from infra.callbacks import CallbackDelivery
from infra.deadlines import Deadlines
from infra.functions import Functions
from infra.layer import CoreLayer
from infra.secrets import Secrets
from infra.table import DataTable
from interlude import wiring


class InterludeStack(Stack):
    # Logical ids of the outputs, stable so scripts and tests can look them up.
    OUTPUT_API_URL = "ApiUrl"
    OUTPUT_TABLE_NAME = "TableName"
    OUTPUT_KEY_RING_SECRET = "KeyRingSecret"

    def __init__(self, scope: Construct, construct_id: str, *, layer_dir: Path, log_level: str = "INFO", **kwargs):
        super().__init__(scope, construct_id, **kwargs)
        self.data = DataTable(self, "Data")
        self.core_layer = CoreLayer(self, "CoreLayer", directory=layer_dir)
        self.functions = Functions(
            self,
            "Functions",
            table=self.data.table,
            index_arns=self.data.index_arns,
            layer=self.core_layer.layer,
            log_level=log_level,
        )
        self.api = HttpFront(self, "Api", handler=self.functions.by_name[wiring.ROUTES_FUNCTION])
        self.secrets = Secrets(self, "Secrets", functions=self.functions.by_name)
        self.callbacks = CallbackDelivery(self, "Callbacks", functions=self.functions.by_name, api_url=self.api.url)
        self.deadlines = Deadlines(self, "Deadlines", functions=self.functions.by_name)
        self.alarms = DeadLetterAlarms(self, "DeadLetterAlarms", queues=self.dead_letter_queues())
        self._output(self.OUTPUT_API_URL, self.api.url, "Base URL of the HTTP API")
        self._output(self.OUTPUT_TABLE_NAME, self.data.table.table_name, "The single DynamoDB table")
        self._output(
            self.OUTPUT_KEY_RING_SECRET,
            self.secrets.by_name[wiring.KEY_RING_SECRET.name].secret_arn,
            "Token key ring secret (interlude tokens rotate|retire --secret <this>)",
        )

    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        queues: dict[str, sqs.IQueue] = {f"{name}-stream": q for name, q in self.functions.stream_dlqs.items()}
        queues.update({q.dead_letter: self.callbacks.queues[q.dead_letter] for q in wiring.QUEUES if q.dead_letter})
        queues["schedules"] = self.deadlines.dead_letters
        return queues

    def _output(self, key: str, value: str, description: str) -> None:
        CfnOutput(self, key, value=value, description=description).override_logical_id(key)
