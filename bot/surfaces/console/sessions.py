"""Signed session cookies for a public console's signed-in users.

A cookie holds a small JSON object, encrypted and authenticated with Fernet (cryptography:
AES-CBC + HMAC-SHA256 with a timestamp) under a key derived from
`CHATOPS_CONSOLE_SESSION_SECRET`, so it can be neither read nor forged nor kept past its
lifetime; every process with the same secret reads it (no server-side session store). Cookies
are HttpOnly, SameSite=Lax (sent on the identity provider's redirect back, never on another
site's POST) and Secure when the console's public URL is https.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from aiohttp import web
from cryptography.fernet import Fernet, InvalidToken


class SessionCookies:
    """Seals and opens one kind of cookie (`name`) with a lifetime of `max_age_s`."""

    def __init__(self, secret: str, *, name: str, max_age_s: int, secure: bool) -> None:
        digest = hashlib.sha256(f"chatops console {name}\0{secret}".encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))
        self.name = name
        self._max_age_s = max_age_s
        self._secure = secure

    def seal(self, response: web.StreamResponse, data: dict[str, Any]) -> None:
        """Set the cookie to `data` (JSON-able), readable back for `max_age_s`."""
        token = self._fernet.encrypt(json.dumps(data, separators=(",", ":")).encode())
        response.set_cookie(
            self.name, token.decode(), max_age=self._max_age_s, path="/", httponly=True,
            secure=self._secure, samesite="Lax",
        )  # fmt: skip

    def open(self, request: web.Request) -> dict[str, Any] | None:
        """The cookie's data, or None (absent, forged, from another secret, or too old)."""
        token = request.cookies.get(self.name)
        if not token:
            return None
        try:
            raw = self._fernet.decrypt(token.encode(), ttl=self._max_age_s)
            data = json.loads(raw)
        except (InvalidToken, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def clear(self, response: web.StreamResponse) -> None:
        response.del_cookie(self.name, path="/")
