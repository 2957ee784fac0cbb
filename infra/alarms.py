"""One CloudWatch alarm per dead-letter queue: a message there is work that did not happen on its own."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct


class DeadLetterAlarms(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, queues: Mapping[str, sqs.IQueue]) -> None:
        super().__init__(scope, construct_id)
        self.by_name: dict[str, cloudwatch.Alarm] = {}
        for name, queue in queues.items():
            self.by_name[name] = cloudwatch.Alarm(
                self,
                name,
                alarm_description=f"interlude: messages are waiting in the {name} dead-letter queue "
                "(docs/operations.md, 'What to watch')",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(5), statistic=cloudwatch.Stats.MAXIMUM
                ),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
