"""The single DynamoDB table: keys, indexes, TTL and stream all come from interlude.wiring.

Or an existing table (a point-in-time restore): imported by name and stream, never modified by the stack.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from interlude import wiring
from interlude_cdk.props import ExistingTable


class DataTable(Construct):
    BILLING = dynamodb.BillingMode.PAY_PER_REQUEST

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        encryption_key: kms.IKey | None,
        existing: ExistingTable | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.imported = existing is not None
        if existing is not None:
            self.table: dynamodb.ITable = dynamodb.Table.from_table_attributes(
                self,
                wiring.TABLE_LOGICAL_NAME,
                table_name=existing.table_name,
                table_stream_arn=existing.stream_arn,
                encryption_key=encryption_key,
            )
            return
        self.table = self._build_table(removal_policy, encryption_key)
        for index in wiring.GLOBAL_INDEXES:
            self._add_index(index)

    @property
    def index_arns(self) -> list[str]:
        return [f"{self.table.table_arn}/index/{index.name}" for index in wiring.GLOBAL_INDEXES]

    def _build_table(self, removal_policy: RemovalPolicy, key: kms.IKey | None) -> dynamodb.Table:
        encryption = {}
        if key is not None:
            encryption = {"encryption": dynamodb.TableEncryption.CUSTOMER_MANAGED, "encryption_key": key}
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
            # The table holds every tenant's runs and their audit trail: unless the deployment says otherwise
            # (a test stack), it outlives the stack and refuses deletion.
            deletion_protection=removal_policy == RemovalPolicy.RETAIN,
            removal_policy=removal_policy,
            **encryption,
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
