"""InterludeStack: composes the constructs; every resource is decided by interlude.wiring."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.api import HttpFront
from infra.functions import Functions
from infra.layer import CoreLayer
from infra.table import DataTable
from interlude import wiring


class InterludeStack(Stack):
    # Logical ids of the outputs, stable so scripts and tests can look them up.
    OUTPUT_API_URL = "ApiUrl"
    OUTPUT_TABLE_NAME = "TableName"

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
        self._output(self.OUTPUT_API_URL, self.api.url, "Base URL of the HTTP API")
        self._output(self.OUTPUT_TABLE_NAME, self.data.table.table_name, "The single DynamoDB table")

    def _output(self, key: str, value: str, description: str) -> None:
        CfnOutput(self, key, value=value, description=description).override_logical_id(key)
