"""Secrets sealed at rest: Fernet (AES-128-CBC with HMAC-SHA256, `cryptography`) under the key
of `CHATOPS_CREDENTIALS_KEY`, which is never stored.

One mechanism for every token the bot keeps: people's connector credentials
(`connectors.oauth_vault`) and the Slack installations' bot, user and refresh tokens
(`bot.storage.slack_installs`). A ciphertext is authenticated, so a wrong key or a tampered row
is told (`Unsealable`), never decrypted into garbage.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken

from bot.errors import ConfigError, StartupError

KEY_SETTING = "CHATOPS_CREDENTIALS_KEY"


class Unsealable(ConfigError):
    """A sealed value the key does not open: the key changed, or the value was never sealed."""


class Sealer:
    """Seals and opens text with one key (see the module docstring)."""

    def __init__(self, key: str) -> None:
        """`key`: 32 url-safe base64-encoded bytes (`chatops credentials key`); StartupError
        naming the setting otherwise."""
        try:
            self._fernet = Fernet(key.encode())
        except ValueError:
            raise StartupError(
                f"{KEY_SETTING} is not a Fernet key (32 url-safe base64-encoded bytes); make "
                "one with `chatops credentials key`"
            ) from None

    def seal(self, text: str) -> str:
        return self._fernet.encrypt(text.encode()).decode()

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise Unsealable(
                f"a stored secret cannot be decrypted with {KEY_SETTING} (was the key changed?)"
            ) from None
