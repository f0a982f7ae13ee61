"""Slack: slack-bolt's `AsyncApp` mounted at `POST /slack/events`, or Socket Mode.

Inbound, nothing is acknowledged before it is stored: an Events API callback goes to the
inbox (`bot.runs.inbox`) as soon as its signature checks out and is answered once committed
(`slack_http`); a click's decision and a reject reason are stored the same way before bolt
answers (`process_before_response=True`: bolt acks after the listener returns, and starts no
untracked tasks of its own). The inbox's workers then dispatch and decide. Bolt's retries are
not auto-acked (`X-Slack-Retry-Num` is only passed through), so a retry is dropped here by
event id (in memory, then by the inbox's dedupe row). Request verification stays on: a bad
signature or a stale timestamp is a 401 and nothing is stored. The clicker's id always comes
from the verified payload, never from the card.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.appkeys import HTTP_KEY
from bot.audit.model import USAGE, Place
from bot.config import Settings
from bot.runs.types import RecentEvents
from bot.surfaces.base import InboundMessage, SurfacePorts, ThreadRef
from bot.surfaces.slack.cards import (
    APPROVE_ACTION,
    APPROVE_THREAD_ACTION,
    GRANT_MODAL,
    REJECT_ACTION,
    REJECT_MODAL,
)
from bot.surfaces.slack.clicks import PLATFORM, SlackClicks
from bot.surfaces.slack.controls import SlackControls
from bot.surfaces.slack.features import WorkspaceFeatures
from bot.surfaces.slack.http import events_route
from bot.surfaces.slack.identity import SlackInstallation, request_problem
from bot.surfaces.slack.limiter import LimiterPausingRetryHandler, UpdateLimiter
from bot.surfaces.slack.markdown import mentions, strip_mention, unescape
from bot.surfaces.slack.outbound import SlackSurface
from bot.surfaces.slack.render import FEEDBACK_ACTION, STOP_ACTION

log = logging.getLogger(__name__)

# Message subtypes that are a person writing; everything else (edits, deletions, joins, bot
# posts) is ignored.
_USER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
AUDIT_COMMAND = "/chatops-audit"
_SEEN_TTL_S = 600.0
_SEEN_MAX = 10_000


class SlackInbound:
    """Turns verified Slack events into inbox records (stored before the ack); clicks go to
    `SlackClicks`; the few things that are not stored (the dialogs, the audit command) run on
    tasks it owns."""

    def __init__(self, ports: SurfacePorts, surface: SlackSurface) -> None:
        self.ports = ports
        self.surface = surface
        self.inbox = ports.inbox
        self.installation = SlackInstallation(surface.client)
        self.clicks = SlackClicks(
            ports.decisions, surface, ports.inbox, self.spawn, self.installation
        )
        self.controls = SlackControls(
            ports.stop, ports.inbox, surface, self.installation, self.spawn
        )
        self.bot_user_id: str | None = None  # learned from bolt's first answered request
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen = RecentEvents(ttl_s=_SEEN_TTL_S, max_items=_SEEN_MAX)

    # task ownership -------------------------------------------------------------------------

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run `work` after the ack, on a task this object tracks until it ends."""
        task = asyncio.get_running_loop().create_task(self._guard(work, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _guard(work: Coroutine[Any, Any, None], name: str) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - one failed event must not take the surface down
            log.exception("slack: %s failed", name)

    async def close(self) -> None:
        """Cancel and await every task still working on a request."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - agreed API
        """Wait until every event and click stored so far has been processed (tests, bench)."""
        async with asyncio.timeout(timeout):
            await self.inbox.wait_idle(timeout)
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def learn_bot_user(self, bot_user_id: str | None) -> None:
        if bot_user_id and self.bot_user_id is None:
            self.bot_user_id = bot_user_id

    def first_time(self, event_id: str) -> bool:
        """True the first time an event id is seen (Slack retries re-send the same id)."""
        return not self._seen.seen(event_id)

    # events --------------------------------------------------------------------------------

    async def request_problem(self, body: dict[str, Any]) -> str | None:
        """Why a verified request is not for this installation (team, app, organisation)."""
        return request_problem(body, await self.installation.identity())

    async def accept_event(self, body: dict[str, Any], bot_user_id: str) -> None:
        """`app_mention` and `message` events -> at most one stored inbox message each;
        `agent_session_stopped` -> a Stop, decided before the ack."""
        self.learn_bot_user(bot_user_id)
        problem = await self.request_problem(body)
        if problem is not None:
            log.warning("slack: event ignored: %s", problem)
            return
        event = body.get("event")
        if isinstance(event, dict) and event.get("type") == "agent_session_stopped":
            if self.first_time(str(body.get("event_id") or "")):
                await self.controls.accept_stop_event(body)
            return
        message = parse_event(body, bot_user_id)
        if message is None or not self.first_time(message.event_id):
            return
        await self.inbox.accept_message(message)

    # the audit slash command ---------------------------------------------------------------

    def on_audit_command(self, body: dict[str, Any]) -> None:
        """`/chatops-audit [window] [connector] [share]`: the report for the viewer alone (an
        ephemeral message), in the channel with `share`; or a private note."""
        channel = body["channel_id"]
        direct = channel.startswith("D") or body.get("channel_name") == "directmessage"
        place = Place(PLATFORM, channel, direct=direct)
        self.spawn(self._audit(body["user_id"], place, body.get("text") or ""), "audit command")

    async def _audit(self, user_id: str, place: Place, text: str) -> None:
        reply = await self.ports.audit(user_id, f"audit {text}".strip(), place)
        channel = place.channel
        if reply is not None and reply.kind == "report" and reply.report is not None:
            try:
                if reply.shared:
                    await self.surface.post_audit_report(channel, reply.report)
                else:
                    await self.surface.show_audit_report(channel, user_id, reply.report)
            except SlackApiError as exc:  # the one who asked must not be left waiting
                error = exc.response.get("error") or "an error"
                log.warning("slack: the audit report could not be posted: %s", error)
                note = (
                    f"The report could not be posted here (Slack said {error}); "
                    "`chatops audit` prints it."
                )
                await self.surface.tell(channel, user_id, note)
            return
        try:
            await self.surface.tell(channel, user_id, reply.message if reply else USAGE)
        except SlackApiError as exc:  # a channel or user Slack does not know: nobody to tell
            log.warning("slack: could not answer /chatops-audit: %s", exc.response.get("error"))


def parse_event(body: dict[str, Any], bot_user_id: str) -> InboundMessage | None:
    """An Events API envelope -> `InboundMessage`, or None when it is not for the runtime.

    A mention in a channel arrives twice (`app_mention` and `message`); the `message` copy is
    dropped. In a DM every message is addressed to the bot; in a channel only thread replies
    are passed on (the runtime ignores threads the bot is not part of).
    """
    event = body.get("event")
    if not isinstance(event, dict):
        return None
    kind = event.get("type")
    user, text, ts, channel = (event.get(k) for k in ("user", "text", "ts", "channel"))
    thread_ts = event.get("thread_ts") or ""
    team, event_id = body.get("team_id"), body.get("event_id")
    fields = (user, text, ts, channel, thread_ts, team, event_id)
    if not all(isinstance(f, str) for f in fields) or not (user and ts and channel and event_id):
        return None  # malformed: every field the runtime keys on must be a non-empty string
    if event.get("bot_id") or user == bot_user_id:
        return None
    if event.get("subtype") and event["subtype"] not in _USER_SUBTYPES:
        return None
    if event.get("edited"):  # an edited mention is re-sent as app_mention: not a new request
        return None
    if kind == "app_mention":
        addressed = True
    elif kind == "message":
        if event.get("channel_type") == "im":
            addressed = True
        elif mentions(text, bot_user_id) or not thread_ts or thread_ts == ts:
            return None
        else:
            addressed = False
    else:
        return None
    return InboundMessage(
        thread=ThreadRef(PLATFORM, team, channel, thread_ts or ts),
        event_id=event_id,
        user_id=user,
        text=unescape(strip_mention(text, bot_user_id)),
        message_id=ts,
        mentions_bot=addressed,
        direct=event.get("channel_type") == "im" or channel.startswith("D"),
    )


def build_bolt_app(settings: Settings, inbound: SlackInbound, client: AsyncWebClient) -> AsyncApp:
    """The bolt app with our listeners. `process_before_response=True`: bolt runs each listener
    inline (no untracked tasks of its own) and answers after it; ours store, or spawn."""
    secret = settings.slack_signing_secret
    bolt = AsyncApp(
        name="chatops",  # without a name bolt walks the whole call stack (about a second)
        client=client,
        signing_secret=secret.get_secret_value() if secret else None,
        process_before_response=True,
        request_verification_enabled=True,
    )

    @bolt.middleware
    async def for_this_installation(body: dict[str, Any], next: Any) -> Any:  # noqa: A002
        """Events, clicks and commands for another workspace, app or organisation are acked
        and dropped before any listener sees them."""
        problem = await inbound.request_problem(body)
        if problem is not None:
            log.warning("slack: request ignored: %s", problem)
            return BoltResponse(status=200, body="")
        return await next()

    @bolt.event("app_mention")
    async def app_mention(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")

    @bolt.event("message")
    async def message(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")

    async def click(ack: Any, body: dict[str, Any], action: dict[str, Any], context: Any) -> None:
        inbound.learn_bot_user(context.bot_user_id)
        await inbound.clicks.accept_click(body, action)  # stored before bolt sends the ack
        await ack()

    for action_id in (APPROVE_ACTION, REJECT_ACTION, APPROVE_THREAD_ACTION):
        bolt.action(action_id)(click)

    @bolt.action(STOP_ACTION)
    async def stop_clicked(ack: Any, body: dict[str, Any]) -> None:
        await inbound.controls.accept_stop_click(body)  # decided before bolt sends the ack
        await ack()

    @bolt.action(FEEDBACK_ACTION)
    async def feedback_clicked(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await inbound.controls.accept_feedback(body, action)  # stored before the ack
        await ack()

    @bolt.event("agent_session_stopped")
    async def session_stopped(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")  # Socket Mode comes here

    @bolt.view(REJECT_MODAL)
    async def reject_submitted(ack: Any, body: dict[str, Any]) -> None:
        await inbound.clicks.accept_reject_submission(body)
        await ack()

    @bolt.view(GRANT_MODAL)
    async def grant_submitted(ack: Any, body: dict[str, Any]) -> None:
        await inbound.clicks.accept_grant_submission(body)
        await ack()

    @bolt.command(AUDIT_COMMAND)
    async def audit_command(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        inbound.on_audit_command(body)

    return bolt


SLACK_INBOUND_KEY = web.AppKey("slack_inbound", SlackInbound)
SLACK_BOLT_KEY = web.AppKey("slack_bolt", AsyncApp)


def setup_slack(app: web.Application, ports: SurfacePorts, settings: Settings) -> None:
    """Mount Slack on the aiohttp app: the events route, Socket Mode, the surface, shutdown."""
    if settings.slack_bot_token is None:
        raise ValueError("SLACK_BOT_TOKEN is not set; Slack is off")
    limiter = UpdateLimiter()
    client = AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        retry_handlers=[LimiterPausingRetryHandler(limiter)],
    )
    features = WorkspaceFeatures(plan=settings.chatops_status_style == "plan")
    surface = SlackSurface(client, limiter, features=features)
    inbound = SlackInbound(ports, surface)
    bolt = build_bolt_app(settings, inbound, client)
    app[SLACK_INBOUND_KEY] = inbound
    app[SLACK_BOLT_KEY] = bolt
    ports.register(surface)

    if settings.slack_signing_secret is not None:
        secret = settings.slack_signing_secret.get_secret_value()
        app.router.add_post("/slack/events", events_route(bolt, secret, inbound))

    async def slack_lifecycle(app: web.Application) -> Any:
        # The app's one client session (opened before us, closed after the runs have ended):
        # Web API calls reuse its connections. Without it slack_sdk opens one per call.
        client.session = app.get(HTTP_KEY)
        socket: AsyncSocketModeHandler | None = None
        if settings.slack_app_token is not None:
            socket = AsyncSocketModeHandler(bolt, settings.slack_app_token.get_secret_value())
            await socket.connect_async()
        try:
            yield
        finally:
            if socket is not None:
                await socket.close_async()
            await inbound.close()
            await surface.sessions.close()

    app.cleanup_ctx.append(slack_lifecycle)
