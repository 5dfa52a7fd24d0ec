"""Caller tokens: made here, shown once, kept only as their SHA-256.

A token is `oas_` and 256 random bits (`secrets.token_urlsafe(32)`). A plain SHA-256 is the right hash for it:
a slow, salted hash (bcrypt, scrypt) makes guessing a low-entropy password expensive, but nobody can guess a
256-bit random value, hashed or not, and a slow hash would cost every authorization its CPU time. The hash is
what the registry keys a token by, so it is looked up in one read, and a leak of the table shows no token.
"""

from __future__ import annotations

import hashlib
import re
import secrets

PREFIX = "oas_"
# `token_urlsafe(32)`: 32 bytes as unpadded base64url, 43 characters.
_TOKEN = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_-]{43}")


def new_token() -> str:
    """A fresh token (256 random bits), to show its caller once."""
    return PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What the registry keeps of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_token(value: str) -> bool:
    """True for what `new_token` makes (anything else is no caller's token, and costs no read)."""
    return _TOKEN.fullmatch(value) is not None


def bearer(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <credential>` header (the scheme in any case), else None."""
    if header is None:
        return None
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential or " " in credential:
        return None
    return credential
