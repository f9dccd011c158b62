"""Roles, the authorities that certify them, and their file names.

Plain names with no cryptography, so the CLI can offer them as choices without slowing
`--help` down; the certificates themselves are made in `certs`.
"""

from __future__ import annotations

from leteo_fed.errors import ConfigError

ROLES = ("csp", "aggregator", "owner", "analyst")
AUTHORITIES = ("owners", "analysts", "services")
AUTHORITY_OF = {
    "owner": "owners",
    "analyst": "analysts",
    "csp": "services",
    "aggregator": "services",
}
BUNDLE = "ca.crt"
# The authorities a party accepts over TLS: those of the parties that call it or that it calls.
# Owners and analysts talk only to the aggregator and the CSP, so they trust the services' CA
# alone: no other custodian can stand in for the service they dial.
TLS_TRUST = {
    "owner": ("services",),
    "analyst": ("services",),
    "aggregator": AUTHORITIES,
    "csp": AUTHORITIES,
}


def ca_file(authority: str, ext: str = "crt") -> str:
    """`owners-ca.crt`, `services-ca.key`, ...: one authority's files."""
    return f"{authority}-ca.{ext}"


def authority_of(role: str) -> str:
    """The authority that certifies `role`."""
    if role not in AUTHORITY_OF:
        raise ConfigError(f"unknown role {role!r}; expected one of {ROLES}", field="role")
    return AUTHORITY_OF[role]
