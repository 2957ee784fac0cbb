"""How long a token and a link minted for a named principal live: apart from the token surfaces' request bodies
(interlude.domain.models.tokens), so the tenant settings' model, which bounds a tenant's own maximum by them, and the
token rules read them without building those models (ADR 0137)."""

# A token's lifetime unless the minter asks for less (the token scheme applies it).
DEFAULT_LIFETIME_S = 30 * 60
# A link minted for a named principal (issue 28 item 5): a day unless asked otherwise, never more than a week (a
# tenant may lower that: TenantSettings.maxLinkLifetimeSeconds), never past the gate's own deadline.
DEFAULT_MINTED_LINK_LIFETIME_S = 24 * 3600
MAX_MINTED_LINK_LIFETIME_S = 7 * 24 * 3600
