"""The deployment's two DynamoDB tables (wiring.TABLES): keys, indexes, TTL and stream all come from interlude.wiring.
The second (wiring.ENTRIES_TABLE, docs/adr/0161) holds the inbox entries and the delivery records, beside the first,
as the first is kept: on demand, TTL, point-in-time recovery, the same key, the same deletion protection.

Or existing tables (a point-in-time restore): imported by name (and the first's stream), never modified by the stack.
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
        self.table: dynamodb.ITable
        self.entries_table: dynamodb.ITable
        if existing is not None:
            self.table = dynamodb.Table.from_table_attributes(
                self,
                wiring.TABLE_LOGICAL_NAME,
                table_name=existing.table_name,
                table_stream_arn=existing.stream_arn,
                encryption_key=encryption_key,
            )
        else:
            built = self._build_table(wiring.TABLE, removal_policy, encryption_key)
            for index in wiring.GLOBAL_INDEXES:
                self._add_index(built, index)
            self.table = built
        if existing is not None and existing.entries_table_name is not None:
            self.entries_table = dynamodb.Table.from_table_attributes(
                self,
                wiring.ENTRIES_TABLE_LOGICAL_NAME,
                table_name=existing.entries_table_name,
                encryption_key=encryption_key,
            )
        else:
            # A restore of a release that had one table (ExistingTable without entries_table_name) gets a new one.
            self.entries_table = self._build_table(wiring.ENTRIES_TABLE, removal_policy, encryption_key)

    @property
    def index_arns(self) -> list[str]:
        return [f"{self.table.table_arn}/index/{index.name}" for index in wiring.GLOBAL_INDEXES]

    def _build_table(
        self, spec: wiring.TableSpec, removal_policy: RemovalPolicy, key: kms.IKey | None
    ) -> dynamodb.Table:
        options: dict = {}
        if key is not None:
            options |= {"encryption": dynamodb.TableEncryption.CUSTOMER_MANAGED, "encryption_key": key}
        if spec.stream_view is not None:
            options["stream"] = dynamodb.StreamViewType[spec.stream_view]
        return dynamodb.Table(
            self,
            spec.logical_name,
            partition_key=_key_attribute(wiring.PARTITION_KEY),
            sort_key=_key_attribute(wiring.SORT_KEY),
            billing_mode=self.BILLING,
            time_to_live_attribute=wiring.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The tables hold every tenant's runs, their audit trail and their open gates' entries: unless the
            # deployment says otherwise (a test stack), they outlive the stack and refuse deletion.
            deletion_protection=removal_policy == RemovalPolicy.RETAIN,
            removal_policy=removal_policy,
            **options,
        )

    @staticmethod
    def _add_index(table: dynamodb.Table, index: wiring.GlobalIndex) -> None:
        table.add_global_secondary_index(
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
