"""One source of wall-clock time: aware UTC, so stored times never mix naive and aware values."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Re-attach UTC to a naive datetime read back from SQLite (which drops tzinfo)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
