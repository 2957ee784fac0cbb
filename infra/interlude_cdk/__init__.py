"""Interlude as a CDK construct library: `from interlude_cdk import Interlude` in your own CDK app.

wiring.py (in the interlude package) decides what is built; InterludeProps decides what a deployment may choose.
"""

from interlude_cdk.construct import Interlude
from interlude_cdk.layer import LayerBuildError
from interlude_cdk.nag import apply_checks
from interlude_cdk.props import (
    Autoscaled,
    CustomDomain,
    ExistingTable,
    InterludeProps,
    RouteThrottle,
    TableCapacity,
    Throttles,
    TraceSampling,
)
from interlude_cdk.stack import InterludeStack

__all__ = [
    "Autoscaled",
    "CustomDomain",
    "ExistingTable",
    "Interlude",
    "InterludeProps",
    "InterludeStack",
    "LayerBuildError",
    "RouteThrottle",
    "TableCapacity",
    "Throttles",
    "TraceSampling",
    "apply_checks",
]
