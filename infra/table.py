"""The single DynamoDB table: keys, indexes, TTL and stream all come from interlude.wiring."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from interlude import wiring


class DataTable(Construct):
    BILLING = dynamodb.BillingMode.PAY_PER_REQUEST
    # The table holds every tenant's runs and their audit trail: losing it to a stack delete or a bad
    # `cdk destroy` is not recoverable, so it outlives the stack and refuses deletion.
    REMOVAL_POLICY = RemovalPolicy.RETAIN

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = self._build_table()
        for index in wiring.GLOBAL_INDEXES:
            self._add_index(index)

    @property
    def index_arns(self) -> list[str]:
        return [f"{self.table.table_arn}/index/{index.name}" for index in wiring.GLOBAL_INDEXES]

    def _build_table(self) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            wiring.TABLE_LOGICAL_NAME,
            partition_key=_key_attribute(wiring.PARTITION_KEY),
            sort_key=_key_attribute(wiring.SORT_KEY),
            billing_mode=self.BILLING,
            time_to_live_attribute=wiring.TTL_ATTRIBUTE,
            stream=dynamodb.StreamViewType[wiring.STREAM_VIEW],
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=True,
            removal_policy=self.REMOVAL_POLICY,
        )

    def _add_index(self, index: wiring.GlobalIndex) -> None:
        self.table.add_global_secondary_index(
            index_name=index.name,
            partition_key=_key_attribute(index.partition_key),
            sort_key=_key_attribute(index.sort_key),
            projection_type=dynamodb.ProjectionType.ALL,
        )


_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def _key_attribute(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[dict(wiring.key_attributes())[name]])
