"""The alerts triggers have opened threads for: the dedupe of webhook deliveries.

One row per (trigger, alert key): written before the sender gets its 200, so a redelivery (the
same Alertmanager fingerprint and start, the same PagerDuty incident), in this process or
another, finds it and starts nothing. The row then holds the thread its alert opened, so the
alert's resolution is told there.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, DateTime, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.clock import utcnow

ALERT_OPENING = "opening"  # claimed; its thread is being opened
ALERT_OPEN = "open"  # its thread is open (and its request stored in the inbox)
ALERT_RESOLVED = "resolved"  # resolution told in its thread


class TriggerAlert(SQLModel, table=True):
    __tablename__ = "trigger_alert"
    __table_args__ = (UniqueConstraint("trigger", "alert_key", name="uq_trigger_alert_key"),)

    id: int | None = Field(default=None, primary_key=True)
    trigger: str
    alert_key: str
    state: str = ALERT_OPENING
    platform: str = ""
    workspace: str = ""
    channel: str = ""
    root: str = ""
    claimed_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    resolved_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
