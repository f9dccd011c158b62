"""Roles, the authorities that certify them, who calls whom, and their file names.

Plain names with no cryptography, so the CLI can offer them as choices without slowing
`--help` down; the certificates themselves are made in `certs`.
"""

from __future__ import annotations

from leteo_fed.errors import ConfigError

ROLES = ("csp", "aggregator", "owner", "analyst", "keyholder")
# One authority per role, each with its own custodian: the aggregator's operator holds the
# aggregators' CA only, so it can mint neither an owner, an analyst nor a CSP.
AUTHORITIES = ("owners", "analysts", "aggregators", "csps")
AUTHORITY_OF = {
    "owner": "owners",
    "analyst": "analysts",
    "aggregator": "aggregators",
    "csp": "csps",
    # a holder of one share of a threshold key (docs/threshold-keys.md): certified by the CSPs'
    # authority, whose custodian is the key ceremony's (it could mint holders; the dealer could
    # already read every share)
    "keyholder": "csps",
}
BUNDLE = "ca.crt"
# Whom each role dials (a channel to a peer trusts the peer role's authority alone), and whose
# calls it accepts (`require_role` in the services).
CALLS = {
    "owner": ("aggregator", "csp", "keyholder"),
    "analyst": ("aggregator", "csp", "keyholder"),
    "aggregator": ("csp", "keyholder", "owner"),
    "csp": (),
    "keyholder": (),
}
CALLED_BY = {
    "owner": ("aggregator",),
    "analyst": (),
    "aggregator": ("owner", "analyst", "aggregator"),
    "csp": ("owner", "aggregator", "analyst"),
    "keyholder": ("owner", "aggregator", "analyst"),
}
# The authorities in a party's TLS bundle `ca.crt`: those of the peers it calls and of the
# callers it accepts. A channel to a peer verifies the server against that peer's authority
# only (`TlsConfig.channel`), so the bundle matters for the callers a server lets through TLS.
TLS_TRUST = {
    role: tuple(
        a for a in AUTHORITIES if a in {AUTHORITY_OF[r] for r in (*CALLS[role], *CALLED_BY[role])}
    )
    for role in ROLES
}


def ca_file(authority: str, ext: str = "crt") -> str:
    """`owners-ca.crt`, `csps-ca.key`, ...: one authority's files."""
    return f"{authority}-ca.{ext}"


def authority_of(role: str) -> str:
    """The authority that certifies `role`."""
    if role not in AUTHORITY_OF:
        raise ConfigError(f"unknown role {role!r}; expected one of {ROLES}", field="role")
    return AUTHORITY_OF[role]
