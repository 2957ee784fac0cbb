"""The rule packs every Interlude app is checked against: a finding that is not acknowledged fails synthesis."""

from __future__ import annotations

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks


def apply_checks(app: App) -> None:
    # Acknowledgements sit next to the resources they excuse, each with its reason.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True), ServerlessChecks(app, verbose=True))
