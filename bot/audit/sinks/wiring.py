"""The audit sinks the settings ask for, and the sender that ships them."""

from __future__ import annotations

from collections.abc import Sequence

import aiohttp

from bot.audit.sinks.sender import SenderPacing, SinkSender
from bot.audit.sinks.targets import FileSink, HttpSink, Sink
from bot.config import Settings
from bot.errors import ConfigError
from bot.storage.database import Database
from bot.storage.outbox import OutboxSinks


def configured_sinks(settings: Settings) -> OutboxSinks:
    """The sinks' names, known before any I/O (the database queues events for them)."""
    if settings.chatops_audit_sink_url and settings.chatops_audit_sink_secret is None:
        raise ConfigError(
            "CHATOPS_AUDIT_SINK_URL is set but CHATOPS_AUDIT_SINK_SECRET is not: "
            "every batch sent to the audit sink is signed with it"
        )
    names = []
    if settings.chatops_audit_sink_url:
        names.append(HttpSink.name)
    if settings.chatops_audit_sink_file:
        names.append(FileSink.name)
    return OutboxSinks(tuple(names))


def build_sinks(settings: Settings, http: aiohttp.ClientSession) -> list[Sink]:
    sinks: list[Sink] = []
    secret = settings.chatops_audit_sink_secret
    if settings.chatops_audit_sink_url and secret is not None:
        sinks.append(
            HttpSink(
                settings.chatops_audit_sink_url,
                secret.get_secret_value(),
                session=http,
                timeout_s=settings.chatops_audit_sink_timeout_s,
            )
        )
    if settings.chatops_audit_sink_file:
        sinks.append(FileSink(settings.chatops_audit_sink_file))
    return sinks


def sink_sender(
    settings: Settings, db: Database, sinks: Sequence[Sink], *, holder: str
) -> SinkSender | None:
    """The sender for `sinks` (None when there are none): a lease outlasts two deliveries."""
    if not sinks:
        return None
    pacing = SenderPacing(
        batch=settings.chatops_audit_sink_batch,
        interval_s=settings.chatops_audit_sink_interval_s,
        retry_min_s=min(1.0, settings.chatops_audit_sink_retry_max_s),
        retry_max_s=settings.chatops_audit_sink_retry_max_s,
        lease_s=max(30.0, 2 * settings.chatops_audit_sink_timeout_s),
    )
    return SinkSender(db, sinks, holder=holder, pacing=pacing)
