"""Token secrets: how they look, how they are made, hashed and checked.

A secret reads `kbmcp_<16 hex>_<43 url-safe characters>`: the hex part is the token's public id
(`tok_<16 hex>`), which finds the stored row; the rest is 256 random bits. Only the SHA-256 of
the whole secret is stored. A fast hash is enough because the secret is random (there is no
password to guess); the comparison is constant-time (`hmac.compare_digest`) so response timing
says nothing about how much of a guess matched.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

SECRET_PREFIX = "kbmcp"
_RANDOM_BYTES = 32
_SECRET = re.compile(r"^kbmcp_(?P<id>[0-9a-f]{16})_(?P<random>[A-Za-z0-9_-]{43})$")


def new_secret() -> tuple[str, str]:
    """A fresh (token public id, secret) pair."""
    id_hex = secrets.token_hex(8)
    secret = f"{SECRET_PREFIX}_{id_hex}_{secrets.token_urlsafe(_RANDOM_BYTES)}"
    return f"tok_{id_hex}", secret


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_id_of(secret: str) -> str | None:
    """The public id a well-formed secret names (None for anything else)."""
    match = _SECRET.match(secret.strip())
    return None if match is None else f"tok_{match['id']}"


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret.strip()), stored_hash)
