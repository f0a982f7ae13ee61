"""People's OAuth tokens, encrypted at rest with a key from the environment.

The database holds only Fernet ciphertext (`bot.storage.sealing`, the Slack installations'
mechanism too); the key is `CHATOPS_CREDENTIALS_KEY`, never stored. Every token the vault
decrypts or is given is remembered in memory as a secret the moment it is seen (`secrets()`),
so the redaction of results, logs, the call log and cards masks it from then on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from bot.clock import utcnow
from bot.errors import ConnectorError
from bot.storage import credentials as queries
from bot.storage.database import Database
from bot.storage.models import UserCredential
from bot.storage.sealing import Sealer, Unsealable


class CredentialError(ConnectorError):
    """A stored credential cannot be used (the key changed, the provider refused a refresh)."""


@dataclass(frozen=True)
class Person:
    """A chat user as a credential's owner: user ids are only unique per platform and
    workspace, so all three name them."""

    platform: str
    workspace: str
    user_id: str

    @property
    def owner(self) -> str:
        return f"{self.platform}:{self.workspace}:{self.user_id}"

    @classmethod
    def from_owner(cls, owner: str) -> Person:
        platform, _, rest = owner.partition(":")
        workspace, _, user_id = rest.rpartition(":")
        return cls(platform, workspace, user_id)


@dataclass(frozen=True)
class TokenSet:
    """What the provider gave: the access token, the refresh token ('' when none) and when the
    access token expires (None: not said)."""

    access_token: str
    refresh_token: str = ""
    expires_at: datetime | None = None


class CredentialVault:
    """Encrypts, stores and loads token sets; remembers every token it sees as a secret."""

    def __init__(self, db: Database, key: str) -> None:
        self._sealer = Sealer(key)  # a malformed key: StartupError naming the setting
        self._db = db
        self._known: set[str] = set()

    def secrets(self) -> list[str]:
        """Every token seen so far (loaded, refreshed, exchanged)."""
        return list(self._known)

    def remember(self, tokens: TokenSet) -> None:
        self._known.update(t for t in (tokens.access_token, tokens.refresh_token) if t)

    def encrypt(self, text: str) -> str:
        return self._sealer.seal(text)

    def decrypt(self, text: str) -> str:
        try:
            return self._sealer.open(text)
        except Unsealable:
            raise CredentialError(
                "a stored credential cannot be decrypted (CHATOPS_CREDENTIALS_KEY changed?); "
                "connect again"
            ) from None

    def _sealed(self, tokens: TokenSet) -> str:
        bundle = {"access_token": tokens.access_token, "refresh_token": tokens.refresh_token}
        return self.encrypt(json.dumps(bundle))

    async def save(self, connector: str, person: Person, tokens: TokenSet, scopes: str) -> None:
        self.remember(tokens)
        row = UserCredential(
            connector=connector, owner=person.owner, platform=person.platform,
            workspace=person.workspace, user_id=person.user_id, secret=self._sealed(tokens),
            scopes=scopes, expires_at=tokens.expires_at, linked_at=utcnow(),
        )  # fmt: skip
        await self._db.run(queries.save_credential, row)

    async def replace(self, connector: str, person: Person, tokens: TokenSet) -> None:
        """A refreshed token set for an existing credential."""
        self.remember(tokens)
        sealed = self._sealed(tokens)
        await self._db.run(
            queries.update_secret, connector, person.owner, sealed, tokens.expires_at
        )

    async def load(self, connector: str, person: Person) -> TokenSet | None:
        row = await self._db.run(queries.credential, connector, person.owner)
        if row is None:
            return None
        bundle = json.loads(self.decrypt(row.secret))
        tokens = TokenSet(
            bundle.get("access_token", ""), bundle.get("refresh_token", ""), row.expires_at
        )
        self.remember(tokens)
        return tokens

    async def linked(self, connector: str, person: Person) -> bool:
        return await self._db.run(queries.credential, connector, person.owner) is not None

    async def forget(self, connector: str, owner: str) -> bool:
        return await self._db.run(queries.delete_credential, connector, owner)
