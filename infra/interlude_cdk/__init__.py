"""Interlude as a CDK construct library: `from interlude_cdk import Interlude` in your own CDK app.

wiring.py (in the interlude package) decides what is built; InterludeProps decides what a deployment may choose.
"""

from interlude_cdk.construct import Interlude
from interlude_cdk.layer import LayerBuildError
from interlude_cdk.nag import apply_checks
from interlude_cdk.props import CustomDomain, ExistingTable, InterludeProps, RouteThrottle, Throttles, TraceSampling
from interlude_cdk.stack import InterludeStack

__all__ = [
    "CustomDomain",
    "ExistingTable",
    "Interlude",
    "InterludeProps",
    "InterludeStack",
    "LayerBuildError",
    "RouteThrottle",
    "Throttles",
    "TraceSampling",
    "apply_checks",
]
