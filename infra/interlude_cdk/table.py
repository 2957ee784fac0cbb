"""The deployment's two DynamoDB tables (wiring.TABLES): keys, indexes, TTL and stream all come from interlude.wiring.
The second (wiring.ENTRIES_TABLE, docs/adr/0161) holds the inbox entries and the delivery records, beside the first,
as the first is kept: TTL, point-in-time recovery, the same key, the same deletion protection. Each is on demand
unless the deployment gives it provisioned capacity with auto scaling (InterludeProps.table_capacity, docs/adr/0168).

Or existing tables (a point-in-time restore): imported by name (and the first's stream), never modified by the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from interlude import wiring
from interlude_cdk.props import ExistingTable, TableCapacity


class DataTable(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        encryption_key: kms.IKey | None,
        existing: ExistingTable | None,
        capacity: Mapping[str, TableCapacity],
    ) -> None:
        super().__init__(scope, construct_id)
        self.capacity = capacity
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
                self._add_index(built, index, capacity.get(wiring.TABLE.logical_name))
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
        capacity = self.capacity.get(spec.logical_name)
        options["billing_mode"] = (
            dynamodb.BillingMode.PAY_PER_REQUEST if capacity is None else dynamodb.BillingMode.PROVISIONED
        )
        table = dynamodb.Table(
            self,
            spec.logical_name,
            partition_key=_key_attribute(wiring.PARTITION_KEY),
            sort_key=_key_attribute(wiring.SORT_KEY),
            time_to_live_attribute=wiring.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The tables hold every tenant's runs, their audit trail and their open gates' entries: unless the
            # deployment says otherwise (a test stack), they outlive the stack and refuse deletion.
            deletion_protection=removal_policy == RemovalPolicy.RETAIN,
            removal_policy=removal_policy,
            **options,
            **_initial_units(capacity),
        )
        if capacity is not None:
            # Application Auto Scaling registers each target under its service-linked role for DynamoDB, which it
            # creates in the account on the first registration (the deploying role may create service-linked roles,
            # as CDK's bootstrap role may).
            _track(capacity, table.auto_scale_read_capacity, table.auto_scale_write_capacity)
        return table

    @staticmethod
    def _add_index(table: dynamodb.Table, index: wiring.GlobalIndex, capacity: TableCapacity | None) -> None:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=_key_attribute(index.partition_key),
            sort_key=_key_attribute(index.sort_key),
            projection_type=dynamodb.ProjectionType.ALL,
            **_initial_units(capacity),
        )
        if capacity is not None:
            # A throttled index throttles the table's writes that feed it: it scales as its table does.
            _track(
                capacity,
                partial(table.auto_scale_global_secondary_index_read_capacity, index.name),
                partial(table.auto_scale_global_secondary_index_write_capacity, index.name),
            )


_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def _initial_units(capacity: TableCapacity | None) -> dict[str, int]:
    """A provisioned table's or index's units at creation (its minimum: auto scaling moves them); none on demand."""
    if capacity is None:
        return {}
    return {"read_capacity": capacity.reads.minimum, "write_capacity": capacity.writes.minimum}


def _track(capacity: TableCapacity, reads: Callable[..., Any], writes: Callable[..., Any]) -> None:
    """Auto scaling of a table's (or an index's) reads and writes within `capacity`, tracking its target."""
    for scale, scaled in ((reads, capacity.reads), (writes, capacity.writes)):
        scale(min_capacity=scaled.minimum, max_capacity=scaled.maximum).scale_on_utilization(
            target_utilization_percent=capacity.target_utilization_percent
        )


def _key_attribute(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[dict(wiring.key_attributes())[name]])
