"""An audit entry's action and surface as a person says them: the console's audit page and the CLI's `audit list`
alike (pure: the CLI loads no more than this)."""

from __future__ import annotations

AUDIT_ACTIONS = {
    "interrupt.decided": "Decided a request",
    "interrupt.voted": "Voted on a request",
    "interrupt.claimed": "Took a request on",
    "interrupt.released": "Let a request go",
    "interrupt.assigned": "Assigned a request",
    "run.cancelled": "Cancelled a run",
    "run.forked": "Forked a run",
    "key.created": "Created a key",
    "key.revoked": "Revoked a key",
    "token.minted": "Made a link",
    "settings.changed": "Changed the settings",
    "credentialGrant.recorded": "Recorded an account connection",
    "tenant.created": "Created the tenant",
    "tenant.suspended": "Suspended the tenant",
    "tenant.resumed": "Resumed the tenant",
}
# Where it was done (the actor's surface).
SURFACES = {
    "api": "through the API",
    "console": "in the console",
    "token": "through a link",
    "slack": "in Slack",
    "cli": "from the command line",
    # The operator surface (`interlude tenants`): the service's operator, not one of the tenant's people.
    "admin": "running this service",
    "run": "by the run",
}


def audit_action_words(action: str) -> str:
    """`key.revoked` as "Revoked a key"; an action this table does not know, its words (`quota.raised`: "Quota raised")."""
    if action in AUDIT_ACTIONS:
        return AUDIT_ACTIONS[action]
    spaced = action.replace(".", " ").replace("_", " ")
    return spaced[:1].upper() + spaced[1:]
