"""Callback delivery: the SQS queues of wiring.QUEUES and what wiring.FUNCTIONS declares about them.

Per function: sqs:SendMessage on exactly the queues it `sends_to`; the SQS event source (reporting batch item
failures) and the consume actions on exactly the queue it `consumes`; Secrets Manager actions on exactly the
secret-name prefixes of its `secret_grants`; and the environment that names them, with (for a function that
creates secrets) the KMS key and tags to create them with. The development-only loopback
switch (interlude.config.delivery.DEV_ALLOW_LOOPBACK_ENV) is never set here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsii
from aws_cdk import Acknowledgment, ArnFormat, Duration, IStableStringProducer, Lazy, Names, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from interlude import wiring
from interlude.config.delivery import PUBLIC_BASE_URL_ENV
from interlude_cdk.functions import (
    acknowledge_dead_letter_queue,
    acknowledge_run_time_resources,
    event_source_mapping,
    pascal_case,
    queue_encryption,
)

# The tags every run-time secret is created with travel in an environment variable (wiring.CREATED_SECRETS_TAGS_ENV)
# of each function that creates secrets, within Lambda's 4 KB a function ("Lambda quotas"); the rest of the largest such
# environment, with the longest deployment name and every optional variable, stays under 3 KB
# (tests/infra/test_construct_probe.py).
CREATED_SECRET_TAGS_BYTES = 1024


class CallbackDelivery(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.Function],
        invoked: Mapping[str, lambda_.IFunction],
        max_concurrency: Mapping[str, int],
        api_url: str,
        deployment: str,
        encryption_key: kms.IKey | None,
        secret_tags: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self._key = encryption_key
        # Secrets created at run time are no resources of the stack: they get its tags (as deployed) through here.
        self.created_secret_tags = Lazy.string(_StackTagsJson(Stack.of(self), secret_tags))
        # Each deployment's own name prefix, so two stacks in one account and region never share a secret.
        self.secret_prefixes = {key: wiring.deployed_secret_prefix(key, deployment) for key in wiring.SECRET_PREFIXES}
        self.queues: dict[str, sqs.Queue] = {}
        for spec in wiring.queues_in_creation_order():
            self.queues[spec.name] = self._build_queue(spec)
        self._invoked = invoked
        self._max_concurrency = max_concurrency
        for spec in wiring.FUNCTIONS:
            self._wire_function(spec, functions[spec.name], api_url)

    def _build_queue(self, spec: wiring.Queue) -> sqs.Queue:
        dead_letter = None
        if spec.dead_letter:
            dead_letter = sqs.DeadLetterQueue(
                queue=self.queues[spec.dead_letter], max_receive_count=spec.max_receive_count
            )
        queue = sqs.Queue(
            self,
            pascal_case(spec.name),
            retention_period=Duration.seconds(spec.retention_s),
            visibility_timeout=Duration.seconds(spec.visibility_timeout_s),
            enforce_ssl=True,
            **queue_encryption(self._key),
            dead_letter_queue=dead_letter,
        )
        if dead_letter is None:
            acknowledge_dead_letter_queue(
                queue,
                "A dead-letter queue itself: it holds dead callback notices (identity and delivery history only) "
                "for an operator.",
            )
        return queue

    def _wire_function(self, spec: wiring.Function, function: lambda_.Function, api_url: str) -> None:
        for name in spec.sends_to:
            queue = self.queues[name]
            function.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn]))
            function.add_environment(wiring.queue(name).url_env, queue.queue_url)
        if spec.consumes:
            queue = self.queues[spec.consumes]
            invoked = self._invoked[spec.name]
            # SqsEventSource's mapping (its id too, so a stack deployed before keeps it), made under the function
            # rather than under whatever invokes it (interlude_cdk.functions.event_source_mapping).
            event_source_mapping(
                function,
                invoked,
                f"SqsEventSource:{Names.node_unique_id(queue.node)}",
                event_source_arn=queue.queue_arn,
                batch_size=spec.batch_size,
                report_batch_item_failures=True,
                # At most its reserved concurrency (InterludeProps.sqs_max_concurrency): pollers beyond it would
                # be throttled, and each throttled receive counts toward the queue's redrive.
                max_concurrency=self._max_concurrency[spec.name],
            )
            # Exactly wiring.QUEUE_CONSUME_ACTIONS on this queue, as SqsEventSource grants them (tests/infra assert it).
            queue.grant_consume_messages(invoked)
            Validations.of(function).acknowledge(
                Acknowledgment(
                    id="Serverless-LambdaEventSourceMappingDestination",
                    reason="An SQS event source has no on-failure destination: the queue's own redrive policy "
                    "moves a message that keeps failing to its dead-letter queue (alarmed).",
                )
            )
            function.add_environment(wiring.queue(spec.consumes).url_env, queue.queue_url)
        for key, actions in spec.secret_grants:
            prefix = self.secret_prefixes[key]
            arn = Stack.of(self).format_arn(
                service="secretsmanager",
                resource="secret",
                resource_name=f"{prefix}*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            function.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=[arn]))
            function.add_environment(key, prefix)
            acknowledge_run_time_resources(
                function,
                arn,
                "One signing secret per tenant (or per webhook subscription), created at run time: the grant is every "
                "secret under this one name prefix and nothing else.",
            )
        if wiring.creates_secrets(spec):
            # The function role's key grant (interlude_cdk.functions.KEY_USE_ACTIONS: Encrypt, GenerateDataKey,
            # Decrypt) covers creating and reading secrets under the key.
            if self._key is not None:
                function.add_environment(wiring.CREATED_SECRETS_KMS_KEY_ENV, self._key.key_arn)
            function.add_environment(wiring.CREATED_SECRETS_TAGS_ENV, self.created_secret_tags)
        if spec.needs_public_base_url:
            function.add_environment(PUBLIC_BASE_URL_ENV, api_url)


@jsii.implements(IStableStringProducer)
class _StackTagsJson:
    """The stack's tags (read at synthesis, after every Tags.of(...) has been applied) and `own` on top, as JSON."""

    def __init__(self, stack: Stack, own: Mapping[str, str]) -> None:
        self._stack = stack
        self._own = dict(own)

    def produce(self) -> str:
        tags = json.dumps({**self._stack.tags.tag_values(), **self._own}, sort_keys=True, separators=(",", ":"))
        if len(tags.encode()) > CREATED_SECRET_TAGS_BYTES:
            raise ValueError(
                f"the stack's tags and the construct's `tags` come to {len(tags.encode())} bytes as JSON, over the "
                f"{CREATED_SECRET_TAGS_BYTES} the functions that create secrets can carry in their environment "
                "(Lambda takes 4 KB of it a function): tag with fewer or shorter tags"
            )
        return tags
