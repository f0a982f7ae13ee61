"""One webhook delivery, from its raw body to threads opened and runs asked for.

`Deliveries.receive` is what `POST /hooks/<name>` calls. In order: verify the delivery
(`bot.triggers.auth`), parse it into alerts (`bot.triggers.payloads`), render each firing
alert's request, then per alert: claim it in the database (a redelivery, here or in another
process, finds the claim and starts nothing), post its summary in the trigger's channel (the
bot's message is the thread's root), and store the request in the inbox as a message of the
trigger's requester in that thread. The inbox dispatches it to the run manager like a mention,
so from there it is an ordinary conversation. All of that is committed before the sender gets
its 200. A resolved alert is told in its thread and, with `on_resolved: stop`, stops its run.
A refused delivery (4xx) stores nothing and is logged once; a secret is never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from bot.chat.controls import StopRequest, StopResult
from bot.chat.ports import InboxPort
from bot.chat.surface import Surface, ThreadOpener
from bot.chat.threads import InboundMessage, ThreadRef
from bot.clock import utcnow
from bot.errors import NotInstalled
from bot.storage import triggers as queries
from bot.storage.database import Database
from bot.triggers.auth import DeliveryRefused, verify
from bot.triggers.hub import ArmedTrigger, TriggerHub
from bot.triggers.payloads import Alert, alerts_of, parse_body
from bot.triggers.templates import TemplateProblem, render

log = logging.getLogger(__name__)

STALE_CLAIM_S = 120.0  # a claim whose thread was never opened (its process died) is retried


@dataclass(frozen=True, kw_only=True)
class TriggerPorts:
    """What triggers may call: the database (alert claims), the inbox (requests stored before
    the 200), the registered surfaces (to open threads and tell resolutions) and Stop."""

    db: Database
    inbox: InboxPort
    surfaces: Callable[[], Mapping[str, Surface]]
    stop: Callable[[StopRequest], Awaitable[StopResult]]
    now: Callable[[], float] = field(default=time.time)


@dataclass(frozen=True)
class Receipt:
    """What a delivery did, as the sender is told (JSON)."""

    started: int = 0
    duplicates: int = 0
    resolved: int = 0
    ignored: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "started": self.started,
            "duplicates": self.duplicates,
            "resolved": self.resolved,
            "ignored": self.ignored,
        }


class Deliveries:
    """Receives the deliveries of every armed trigger (see the module docstring)."""

    def __init__(self, hub: TriggerHub, ports: TriggerPorts) -> None:
        self._hub = hub
        self._ports = ports

    async def receive(self, name: str, headers: Mapping[str, str], body: bytes) -> Receipt:
        """Handle one delivery; `DeliveryRefused` (4xx) with the reason the sender is told."""
        armed = self._hub.armed.get(name)
        if armed is None:
            why = self._hub.skipped.get(name)
            reason = f"trigger {name!r} is off: {why}" if why else f"no trigger named {name!r}"
            raise DeliveryRefused(404, reason)
        trigger = armed.trigger
        try:
            verify(
                trigger.source, armed.secret, headers, body,
                now=self._ports.now(), replay_window_s=trigger.replay_window_s,
            )  # fmt: skip
            alerts = alerts_of(trigger.source, parse_body(body), headers, body)
            prepared = [(alert, *self._texts(armed, alert)) for alert in alerts]
            if any(not alert.resolved for alert in alerts):
                self._opener(trigger.where.platform)  # 503 before anything is claimed
        except DeliveryRefused as refused:
            log.warning(
                "trigger %r refused a delivery (%d): %s", name, refused.status, refused.reason
            )
            raise
        started = duplicates = resolved = 0
        for alert, summary, request in prepared:
            if alert.resolved:
                resolved += await self._resolve(armed, alert, summary)
            elif await self._open(armed, alert, summary, request):
                started += 1
            else:
                duplicates += 1
        ignored = len(alerts) == 0
        return Receipt(started, duplicates, resolved, int(ignored))

    def _texts(self, armed: ArmedTrigger, alert: Alert) -> tuple[str, str]:
        """The alert's thread summary and its run's request (rendered before anything is
        stored: a template that fails stores nothing)."""
        trigger = armed.trigger
        try:
            summary = render(trigger.summary, alert.context) if trigger.summary else ""
            request = render(trigger.request, alert.context)
        except TemplateProblem as exc:
            raise DeliveryRefused(422, f"trigger {trigger.name!r}: {exc}") from None
        if not request:
            raise DeliveryRefused(422, f"trigger {trigger.name!r}: the request rendered empty")
        return summary or alert.summary, request

    def _opener(self, platform: str) -> ThreadOpener:
        surface = self._ports.surfaces().get(platform)
        if not isinstance(surface, ThreadOpener):
            raise DeliveryRefused(503, f"{platform} is not connected on this bot")
        return surface

    async def _open(self, armed: ArmedTrigger, alert: Alert, summary: str, request: str) -> bool:
        """Open the alert's thread and ask for its run; False when it was a duplicate."""
        trigger, db = armed.trigger, self._ports.db
        opener = self._opener(trigger.where.platform)
        claimed = await db.run_first(
            queries.claim_alert, trigger.name, alert.key, now=utcnow(), stale_s=STALE_CLAIM_S
        )
        if not claimed:
            log.info(
                "trigger %r: alert %s delivered again; nothing started", trigger.name, alert.key
            )
            return False
        try:
            thread = await self._open_thread(opener, armed, summary)
            message = InboundMessage(
                thread=thread,
                event_id=f"trigger:{trigger.name}:{alert.key}",
                user_id=trigger.requester_id,
                text=request,
                connectors=tuple(trigger.connectors) or None,
            )
            await self._ports.inbox.accept_message(message)
            key = (thread.platform, thread.workspace, thread.channel, thread.root)
            await db.run_first(queries.alert_opened, trigger.name, alert.key, key)
        except BaseException:
            await db.run_first(queries.release_alert, trigger.name, alert.key)
            raise
        log.info("trigger %r: alert %s opened a thread in %s", trigger.name, alert.key, thread)
        return True

    async def _open_thread(
        self, opener: ThreadOpener, armed: ArmedTrigger, summary: str
    ) -> ThreadRef:
        """The alert's thread; a workspace without an installation (Slack OAuth mode) is a 503
        that says so: the sender retries, and a delivery after the install goes through."""
        where = armed.trigger.where
        try:
            return await opener.open_thread(where.channel, where.workspace, summary)
        except NotInstalled:
            reason = (
                f"trigger {armed.trigger.name!r}: the {where.platform} workspace "
                f"{where.workspace} has no installation of the app; install it there"
            )
            log.error("%s; nothing was opened", reason)
            raise DeliveryRefused(503, reason) from None

    async def _resolve(self, armed: ArmedTrigger, alert: Alert, summary: str) -> int:
        """Tell the alert's thread it resolved (once), and stop its run when configured."""
        trigger = armed.trigger
        found = await self._ports.db.run_first(
            queries.resolve_alert, trigger.name, alert.key, now=utcnow()
        )
        if found is None:
            return 0
        thread = ThreadRef(*found)
        surface = self._ports.surfaces().get(thread.platform)
        if surface is not None:
            first_line = summary.splitlines()[0] if summary else "the alert"
            await surface.post_notice(thread, f"Resolved: {first_line}")
        if trigger.on_resolved == "stop":
            result = await self._ports.stop(
                StopRequest(platform=thread.platform, user_id=trigger.requester_id, thread=thread)
            )
            log.info(
                "trigger %r: alert %s resolved; stop: %s", trigger.name, alert.key, result.status
            )
        return 1
