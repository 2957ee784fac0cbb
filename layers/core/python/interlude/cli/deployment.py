"""A deployment, as the CLI finds it: `--stack NAME` (or $INTERLUDE_STACK) reads the stack's outputs.

Only boto3 is needed (no moto, no dev environment). AWS's own failures (no region, no credentials, a refused
call, a missing stack or output) become one line for the operator, never a traceback.
"""

from __future__ import annotations

import argparse
from functools import cache

from interlude.config.local import STACK_ENV, cli_settings


class DeploymentError(Exception):
    """Something the operator must fix before the command can run; its message is the whole story."""


def add_stack_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack", default=cli_settings().stack or None, help=f"a deployed stack, found by its outputs (${STACK_ENV})"
    )


def stack_output(args: argparse.Namespace, output: str) -> str | None:
    """The named output of the stack --stack names; None without --stack."""
    if not getattr(args, "stack", None):
        return None
    outputs = _outputs(args.stack)
    if output not in outputs:
        raise DeploymentError(
            f"stack {args.stack!r} has no output {output!r} (deployed by an older Interlude? deploy it again)"
        )
    return outputs[output]


def optional_stack_output(args: argparse.Namespace, output: str) -> str | None:
    """The named output of the stack --stack names; None without --stack or when the stack has no such output."""
    return _outputs(args.stack).get(output) if getattr(args, "stack", None) else None


@cache
def _outputs(stack: str) -> dict[str, str]:
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("cloudformation")
    try:
        (found,) = client.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error):
            raise DeploymentError(
                f"no stack {stack!r} in {client.meta.region_name} (check --stack and AWS_REGION)"
            ) from None
        raise
    return {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])}


def aws_error_line(error: BaseException) -> str | None:
    """One line saying what to fix, for an AWS failure the operator can act on; None for anything else."""
    from botocore import exceptions

    if isinstance(error, exceptions.NoRegionError):
        return "no AWS region: set AWS_DEFAULT_REGION (or AWS_PROFILE, a profile with a region)"
    if isinstance(error, exceptions.NoCredentialsError | exceptions.PartialCredentialsError):
        return "no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    if isinstance(error, exceptions.ClientError):
        details = error.response.get("Error", {})
        return f"AWS refused {error.operation_name}: {details.get('Code')}: {details.get('Message')}"
    if isinstance(error, exceptions.EndpointConnectionError | exceptions.ConnectTimeoutError):
        return f"cannot reach AWS: {error}"
    if isinstance(error, exceptions.BotoCoreError):
        return f"AWS: {error}"
    return None
