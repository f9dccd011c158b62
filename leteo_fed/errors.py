"""Errors that name the problem, so services and the CLI can report them in one readable line."""

from __future__ import annotations


class LeteoError(Exception):
    """Base class: a user-facing problem (bad input, bad config, refused request)."""

    def __init__(self, message: str, *, field: str | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        # an owner's refusal rule (`bounds`, `rows`...): the only part of a problem with the
        # site's data that may leave the site (`owner_agent.refusals`); the message stays there
        self.rule = rule


class ConfigError(LeteoError):
    """A configuration file or flag is malformed or inconsistent."""


class DataError(LeteoError):
    """The data cannot be used as asked: missing column, NaN, out-of-bound value, ..."""


class EncodingError(LeteoError):
    """A value or aggregate does not fit its declared fixed-point encoding or the modulus."""


class ProtocolError(LeteoError):
    """A message violates the protocol: wrong round, wrong dimension, duplicate, ..."""


class KeyStoreError(LeteoError):
    """A key file is missing, unreadable, too permissive or cannot be decrypted."""


class NotFoundError(ProtocolError):
    """The named round, owner or key does not exist."""


class DuplicateError(ProtocolError):
    """Something that may happen once per round happened twice (a share, a decryption)."""


class AccessDenied(LeteoError):
    """The caller's certificate identity is not allowed to make this call."""


class PeerUnavailable(LeteoError):
    """A peer service could not be reached or dropped the connection."""


class Overloaded(LeteoError):
    """A service is at its capacity (e.g. connected owners); try later or raise the limit."""
