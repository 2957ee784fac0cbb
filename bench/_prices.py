"""List prices, default quotas and the duration model the cost and ceiling benches use: each with where it was read.

Prices are us-east-1, on demand, without free tiers, as read on 2026-12-05 (the pages named beside each; where a page
was read through a transcription or an archive, that is said). Edit here to compare another region or a new price.
An ESTIMATE is marked as one: a figure no page we read states.
"""

from __future__ import annotations

from typing import NamedTuple

READ_ON = "2026-12-05"


class Price(NamedTuple):
    usd: float
    per: str
    source: str
    estimate: bool = False


PRICES: dict[str, Price] = {
    "http_api_request": Price(1.00 / 1e6, "request", "aws.amazon.com/api-gateway/pricing (HTTP APIs, first 300 M)"),
    "apigw_ws_message": Price(1.00 / 1e6, "message (32 KB)", "aws.amazon.com/api-gateway/pricing (WebSocket APIs, first 1 B messages)"),
    "apigw_ws_connection_minute": Price(0.25 / 1e6, "connection-minute", "aws.amazon.com/api-gateway/pricing (WebSocket APIs)"),
    "lambda_request": Price(0.20 / 1e6, "request", "aws.amazon.com/lambda/pricing"),
    # Arm (Graviton) duration, first tier; the page renders it client-side: read through git.mcrn.ar's copy of the
    # table ("arm64 $0.0000133334 / GB-s") and the api-evangelist transcription of the page (2026-09-20).
    "lambda_gb_second_arm": Price(0.0000133334, "GB-s", "aws.amazon.com/lambda/pricing (Arm, first 6 B GB-s/month)"),
    "dynamodb_wru": Price(0.625 / 1e6, "write request unit", "aws.amazon.com/dynamodb/pricing/on-demand"),
    "dynamodb_rru": Price(0.125 / 1e6, "read request unit", "aws.amazon.com/dynamodb/pricing/on-demand"),
    # Provisioned capacity (InterludeProps.table_capacity, docs/adr/0168): a unit-hour holds one write (1 KB) or one
    # strongly consistent read (4 KB) a second for an hour, used or not; unchanged by the on-demand cut of 2024-11.
    "dynamodb_wcu_hour": Price(0.00065, "write capacity unit-hour", "aws.amazon.com/dynamodb/pricing/provisioned"),
    "dynamodb_rcu_hour": Price(0.00013, "read capacity unit-hour", "aws.amazon.com/dynamodb/pricing/provisioned"),
    "dynamodb_storage_gb_month": Price(0.25, "GB-month", "aws.amazon.com/dynamodb/pricing/on-demand (Standard class)"),
    "sqs_request": Price(0.40 / 1e6, "request (64 KB)", "aws.amazon.com/sqs/pricing (standard queues)"),
    "scheduler_invocation": Price(1.00 / 1e6, "invocation", "aws.amazon.com/eventbridge/pricing (Scheduler; API calls free)"),
    "secrets_api_call": Price(0.05 / 10_000, "API call", "aws.amazon.com/secrets-manager/pricing"),
    "secret_month": Price(0.40, "secret-month", "aws.amazon.com/secrets-manager/pricing"),
    "s3_put": Price(0.005 / 1000, "PUT", "aws.amazon.com/s3/pricing (S3 Standard)"),
    "s3_get": Price(0.0004 / 1000, "GET", "aws.amazon.com/s3/pricing (S3 Standard)"),
    "logs_ingested_gb_standard": Price(0.50, "GB ingested", "aws.amazon.com/cloudwatch/pricing (Standard log class)"),
    "logs_ingested_gb_infrequent_access": Price(0.25, "GB ingested", "aws.amazon.com/cloudwatch/pricing (Infrequent Access)"),
    # Billed on compressed bytes: priced on the raw bytes here, an upper bound.
    "logs_stored_gb_month": Price(0.03, "GB-month", "aws.amazon.com/cloudwatch/pricing (archived, compressed)"),
    "dashboard_month": Price(3.00, "dashboard-month", "aws.amazon.com/cloudwatch/pricing"),
    "xray_trace_recorded": Price(5.00 / 1e6, "trace recorded", "aws.amazon.com/xray/pricing"),
    "sfn_standard_transition": Price(0.025 / 1000, "state transition", "aws.amazon.com/step-functions/pricing"),
    # Temporal Cloud, docs.temporal.io/cloud/pricing (temporalio/documentation, docs/evaluate/cloud/pricing.mdx):
    # Pay-As-You-Go from $50 per million Actions, down to $25 past 100 M a month; the plan adds 10% of usage.
    "temporal_action_high": Price(50.0 / 1e6, "action", "docs.temporal.io/cloud/pricing (first 5 M a month)"),
    "temporal_action_low": Price(25.0 / 1e6, "action", "docs.temporal.io/cloud/pricing (past 100 M a month)"),
    "temporal_plan_share": Price(0.10, "of usage", "docs.temporal.io/cloud/pricing (Developer/Business plan)"),
    "temporal_active_gbh": Price(0.042, "GBh", "docs.temporal.io/cloud/pricing (Active Storage)"),
    "temporal_retained_gbh": Price(0.00105, "GBh", "docs.temporal.io/cloud/pricing (Retained Storage)"),
    # Lambda durable functions: $8.00 per million durable operations is the only rate we could read, and only through
    # a transcription of aws.amazon.com/lambda/pricing (api-evangelist/aws-lambda, read 2026-09-20), which labels it
    # "example rate". The data rates below are not on any page we read: ESTIMATES, from the launch announcement as
    # remembered, to be checked on the pricing page before the comparison is relied on.
    "durable_operation": Price(8.00 / 1e6, "durable operation", "aws.amazon.com/lambda/pricing via api-evangelist transcription, 2026-09-20 ('example rate')"),
    "durable_data_written_gb": Price(0.25, "GB written", "not found on a page we read", estimate=True),
    "durable_data_retained_gb_month": Price(0.15, "GB-month", "not found on a page we read", estimate=True),
}


def price(name: str) -> float:
    return PRICES[name].usd


# Default quotas of a fresh account (us-east-1), for the per-deployment ceiling.
class Quota(NamedTuple):
    value: float
    unit: str
    source: str


QUOTAS: dict[str, Quota] = {
    "lambda_concurrency": Quota(1000, "concurrent executions per account and region", "Lambda quotas page"),
    "http_api_rps": Quota(10_000, "requests/s per account and region (burst 5,000)", "API Gateway quotas page"),
    "table_wru": Quota(40_000, "write units/s per on-demand table", "DynamoDB service quotas page"),
    "table_rru": Quota(40_000, "read units/s per on-demand table", "DynamoDB service quotas page"),
    "partition_wru": Quota(1_000, "write units/s per partition (and per item)", "DynamoDB partitions page"),
    "partition_rru": Quota(3_000, "read units/s per partition", "DynamoDB partitions page"),
    # A new on-demand table sustains 4,000 writes/s at once ("initial throughput"): at least four partitions, and
    # as many stream shards (one per partition), each read by wiring.STREAM_PARALLELIZATION `stream` invocations at
    # a time.
    "initial_partitions": Quota(4, "partitions of a new on-demand table (4,000 WRU/s ÷ 1,000)", "DynamoDB on-demand initial throughput"),
    "scheduler_create_tps": Quota(5_000, "CreateSchedule requests/s", "docs.aws.amazon.com/scheduler/latest/UserGuide/scheduler-quotas.html (us-east-1)"),
    "scheduler_delete_tps": Quota(5_000, "DeleteSchedule requests/s (ESTIMATE: taken as CreateSchedule's)", "scheduler-quotas.html"),
    "scheduler_invocations_tps": Quota(1_000, "schedule invocations/s", "scheduler-quotas.html (invocations throttle limit)"),
}

# Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB (Lambda's memory configuration page).
VCPU_MB = 1769
# The SQS event source mappings' idle polling: five pollers per queue (Lambda's "Configuring scaling behavior for SQS
# event source mappings": it "can optimize to as few as 2 concurrent batches", but not with a maximum concurrency set,
# which the construct sets), each an empty long poll of SQS's longest wait, 20 s (SQS's long polling page).
IDLE_POLLERS_PER_QUEUE = 5
LONG_POLL_S = 20
# What a batch holds at a pace (bench/cost_per_million.py's batch model), from the mappings' documented polling:
# - the table stream: "Lambda polls shards in your DynamoDB stream for records at a base rate of 4 times per second",
#   and "by default, Lambda invokes your function as soon as records are available" (Lambda developer guide,
#   with-ddb.html: no batching window, wiring sets none); with a ParallelizationFactor a shard's records are taken in
#   that many concurrent batches, a partition key's in order (services-ddb-params.html), so a poll's records of
#   different runs spread over the lanes;
# - an SQS queue: with no batching window "the lambda function will be invoked immediately with the records that are
#   available" (the CDK's SqsEventSourceProps; MaximumBatchingWindowInSeconds defaults to 0, settable in whole seconds
#   only: services-sqs-parameters.html), by "five batches at a time with five concurrent invocations" that scale up only
#   while messages wait (services-sqs-scaling.html; IDLE_POLLERS_PER_QUEUE below): each poller holds its batch until its
#   invocation returns (the mapping invokes synchronously and deletes a batch's messages after it), so a receive
#   finds what arrived while every poller was busy, at least one message.
STREAM_POLLS_PER_S = 4
# DynamoDB "typically deletes expired items within two days of expiration", and until then they "still count towards
# storage" (API_UpdateTimeToLive.html; ttl-expired-items.html): an expiring item is billed to its ttl and this much more
# (the documented bound: an upper one).
TTL_DELETION_LAG_DAYS = 2
# A call's round trip from a function in the same region, p50: ESTIMATES (DynamoDB documents single-digit
# milliseconds; the others are typical figures, not published ones). The duration model adds them to the CPU.
CALL_MS: dict[str, float] = {
    "dynamodb:GetItem": 4,
    "dynamodb:BatchGetItem": 5,
    "dynamodb:Query": 5,
    "dynamodb:PutItem": 6,
    "dynamodb:UpdateItem": 6,
    "dynamodb:DeleteItem": 6,
    "dynamodb:BatchWriteItem": 8,
    "dynamodb:TransactWriteItems": 15,
    "dynamodb:TransactGetItems": 8,
    "sqs:SendMessage": 10,
    # The event source mapping's own requests: they hold the poller (its cycle), not the function.
    "sqs:ReceiveMessage": 10,
    "sqs:DeleteMessageBatch": 10,
    "sqs:SendMessageBatch": 12,
    "sqs:ChangeMessageVisibility": 8,
    "scheduler:CreateSchedule": 30,
    "scheduler:DeleteSchedule": 25,
    "secretsmanager:GetSecretValue": 15,
    "s3:PutObject": 25,
    "s3:GetObject": 15,
}
DEFAULT_CALL_MS = 10
# An outbound HTTP request to a tenant's receiver (a callback notice), as adapters/delivery/pinned_http.py makes it:
# the egress guard's name lookup, then a fresh connection (nothing pooled, `Connection: close`): the TCP handshake, the
# TLS handshake (1.3: one round trip; the floor is 1.2, two), the request and its answer; and the receiver's own time.
# The round trip to a tenant's receiver and its time are ESTIMATES (a well-run receiver on the public internet, near
# the region); the TLS context the POST builds costs CPU, measured apart (bench/lifecycles.py tls_context_cpu_ms).
DNS_LOOKUP_MS = 2
RECEIVER_RTT_MS = 20
POST_ROUND_TRIPS = 3
RECEIVER_MS = 20
OUTBOUND_HTTP_MS = DNS_LOOKUP_MS + POST_ROUND_TRIPS * RECEIVER_RTT_MS + RECEIVER_MS
# Lambda's own overhead per invocation (runtime hand-off), billed: an ESTIMATE.
INVOKE_OVERHEAD_MS = 1
