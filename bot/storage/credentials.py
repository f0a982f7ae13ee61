"""Queries over per-user credentials and their connect links (`bot.storage.models.credentials`).

What they store is already encrypted by the caller (`connectors.oauth_vault`); nothing here sees
a token. Claiming a link's callback is a conditional UPDATE, so a replayed callback (the same
state twice, in one process or two) finds it used: the row count says who won.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from bot.clock import as_utc, utcnow
from bot.storage.models import OAuthLink, UserCredential


def add_link(session: Session, link: OAuthLink) -> None:
    session.add(link)


def link_by_id(session: Session, link_id: str) -> OAuthLink | None:
    row = session.get(OAuthLink, link_id)
    if row is not None:
        row.expires_at = as_utc(row.expires_at)
    return row


def link_by_state(session: Session, state_hash: str) -> OAuthLink | None:
    row = session.exec(select(OAuthLink).where(OAuthLink.state_hash == state_hash)).first()
    if row is not None:
        row.expires_at = as_utc(row.expires_at)
    return row


def start_link(
    session: Session, link_id: str, state_hash: str, verifier: str, browser_hash: str
) -> bool:
    """Give a link its state (a new one each time the browser opens it, while it is unused
    and unexpired); False when it is used or expired."""
    result = session.execute(
        update(OAuthLink)
        .where(col(OAuthLink.id) == link_id, col(OAuthLink.used_at).is_(None))
        .where(col(OAuthLink.expires_at) > utcnow())
        .values(state_hash=state_hash, verifier=verifier, browser_hash=browser_hash)
    )
    return result.rowcount == 1  # type: ignore[attr-defined]


def claim_link(session: Session, link_id: str) -> bool:
    """Mark a link used, once: True for the one callback that wins."""
    result = session.execute(
        update(OAuthLink)
        .where(col(OAuthLink.id) == link_id, col(OAuthLink.used_at).is_(None))
        .values(used_at=utcnow())
    )
    return result.rowcount == 1  # type: ignore[attr-defined]


def drop_expired_links(session: Session, before: datetime) -> int:
    result = session.execute(delete(OAuthLink).where(col(OAuthLink.expires_at) < before))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def save_credential(session: Session, row: UserCredential) -> None:
    """Insert or replace one person's credential for one connector."""
    existing = session.get(UserCredential, (row.connector, row.owner))
    if existing is None:
        session.add(row)
        return
    for name in ("secret", "scopes", "expires_at", "linked_at", "refreshed_at"):
        setattr(existing, name, getattr(row, name))
    session.add(existing)


def update_secret(
    session: Session, connector: str, owner: str, secret: str, expires_at: datetime | None
) -> None:
    """A refreshed token bundle."""
    session.execute(
        update(UserCredential)
        .where(col(UserCredential.connector) == connector, col(UserCredential.owner) == owner)
        .values(secret=secret, expires_at=expires_at, refreshed_at=utcnow())
    )


def credential(session: Session, connector: str, owner: str) -> UserCredential | None:
    row = session.get(UserCredential, (connector, owner))
    if row is not None:
        _utc(row)
    return row


def credentials_of(session: Session, user_id: str | None = None) -> list[UserCredential]:
    """Every stored credential (of one user id when given), by connector and owner."""
    query = select(UserCredential)
    if user_id is not None:
        query = query.where(UserCredential.user_id == user_id)
    rows = list(session.exec(query.order_by(UserCredential.connector, UserCredential.owner)))
    for row in rows:
        _utc(row)
    return rows


def delete_credential(session: Session, connector: str, owner: str) -> bool:
    result = session.execute(
        delete(UserCredential).where(
            col(UserCredential.connector) == connector, col(UserCredential.owner) == owner
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _utc(row: UserCredential) -> None:
    row.linked_at = as_utc(row.linked_at)
    if row.expires_at is not None:
        row.expires_at = as_utc(row.expires_at)
    if row.refreshed_at is not None:
        row.refreshed_at = as_utc(row.refreshed_at)
