"""Per-user connector credentials (OAuth) and the one-time links that create them.

`UserCredential`: one person's tokens for one connector, encrypted at rest (the row holds
ciphertext only; the key is `CHATOPS_CREDENTIALS_KEY`, never in the database). `OAuthLink`: a
connect link sent privately to one person; its state and PKCE verifier once the browser started
the flow, used once (`used_at`), expiring soon after it was made.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, DateTime, Text
from sqlmodel import Field, SQLModel

from bot.clock import utcnow


class UserCredential(SQLModel, table=True):
    """`owner` is `platform:workspace:user`; `secret` the encrypted token bundle (access and
    refresh token); `expires_at` when the access token stops working (None: not said)."""

    __tablename__ = "user_credential"

    connector: str = Field(primary_key=True)
    owner: str = Field(primary_key=True)
    platform: str = ""
    workspace: str = ""
    user_id: str = Field(default="", index=True)
    secret: str = Field(sa_column=Column(Text, nullable=False))
    scopes: str = Field(default="", sa_column=Column(Text, nullable=False))
    expires_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    linked_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    refreshed_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


class OAuthLink(SQLModel, table=True):
    """A connect link: `id` is the hash of the token in the link (the token itself is only in
    the person's private message); `state_hash`, `verifier` (encrypted) and `browser_hash` are
    set when the browser opens it; `used_at` when its callback came (once)."""

    __tablename__ = "oauth_link"

    id: str = Field(primary_key=True)
    connector: str
    owner: str
    platform: str = ""
    workspace: str = ""
    user_id: str = ""
    state_hash: str | None = Field(default=None, index=True, unique=True)
    verifier: str = Field(default="", sa_column=Column(Text, nullable=False))
    browser_hash: str = ""
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    used_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
