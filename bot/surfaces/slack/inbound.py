"""Slack: slack-bolt's `AsyncApp` mounted at `POST /slack/events`, or Socket Mode.

Inbound, nothing is acknowledged before it is stored: an Events API callback goes to the
inbox (`bot.inbox`) as soon as its signature checks out and is answered once committed
(`http.py`); a click's decision and a reject reason are stored the same way before bolt
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
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.appkeys import PLATFORM_HTTP_KEY
from bot.chat.audit_report import USAGE, Place
from bot.chat.ports import SurfacePorts
from bot.chat.threads import ThreadRef
from bot.config import Settings
from bot.errors import NotInstalled, StartupError
from bot.observability.metrics import Metrics, PlatformMeter
from bot.recent_events import RecentEvents
from bot.surfaces.slack.clicks import PLATFORM, SlackClicks
from bot.surfaces.slack.client import MeteredWebClient
from bot.surfaces.slack.controls import SlackControls
from bot.surfaces.slack.events import parse_event
from bot.surfaces.slack.features import WorkspaceFeatures
from bot.surfaces.slack.home import SlackHome
from bot.surfaces.slack.http import events_route
from bot.surfaces.slack.identity import (
    SlackInstallation,
    request_enterprise,
    request_problem,
    request_team,
)
from bot.surfaces.slack.limiter import UpdateLimiter, retry_handlers
from bot.surfaces.slack.listeners import build_bolt_app
from bot.surfaces.slack.oauth import (
    UNINSTALL_EVENTS,
    OAuthStores,
    SlackOAuth,
    Uninstalls,
    add_install_routes,
    build_oauth,
)
from bot.surfaces.slack.outbound import SlackSurface
from bot.surfaces.slack.question_clicks import SlackQuestions
from bot.surfaces.slack.signin import slack_sign_in

log = logging.getLogger(__name__)


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
        clients = surface.clients
        self.installation = SlackInstallation(
            surface.client, installed=clients.identity if clients.oauth else None
        )
        self.uninstalls: Uninstalls | None = None  # OAuth mode's (set by `setup_slack`)
        self.clicks = SlackClicks(
            ports.decisions, surface, ports.inbox, self.spawn, self.installation
        )
        self.questions = SlackQuestions(ports.questions, surface, self.spawn)
        self.controls = SlackControls(
            ports.stop, ports.inbox, surface, self.installation, self.spawn
        )
        self.bot_user_id: str | None = None  # learned from bolt's first answered request
        self.home = SlackHome(clients.client, ports.decisions, per_workspace=clients.oauth)
        surface.home = self.home
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
            await self.home.wait_idle()

    def learn_bot_user(self, bot_user_id: str | None) -> None:
        if bot_user_id and self.bot_user_id is None:
            self.bot_user_id = bot_user_id

    def first_time(self, event_id: str) -> bool:
        """True the first time an event id is seen (Slack retries re-send the same id)."""
        return not self._seen.seen(event_id)

    # events --------------------------------------------------------------------------------

    def learn_org(self, body: dict[str, Any]) -> None:
        """A verified request says which Grid org its team is in (an org install's token
        serves it)."""
        self.surface.clients.learn_org(request_team(body), request_enterprise(body))

    async def request_problem(self, body: dict[str, Any]) -> str | None:
        """Why a verified request is not for this installation (team, app, organisation);
        with OAuth installs, for the installation of the request's own team."""
        team = request_team(body)
        if not self.installation.several:
            return request_problem(body, await self.installation.identity())
        self.learn_org(body)
        try:
            me = await self.installation.identity(team)
        except NotInstalled:
            return f"workspace {team!r} has no installation of this app"
        return request_problem(body, me, org_installs=True)

    async def accept_event(self, body: dict[str, Any], bot_user_id: str) -> None:
        """`app_mention` and `message` events -> at most one stored inbox message each;
        `agent_session_stopped` -> a Stop, decided before the ack; `app_home_opened` -> the
        person's App Home published (after the ack)."""
        self.learn_bot_user(bot_user_id)
        problem = await self.request_problem(body)
        if problem is not None:
            log.warning("slack: event ignored: %s", problem)
            return
        event = body.get("event")
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in UNINSTALL_EVENTS:
            if self.uninstalls is not None:  # decided before the ack (Slack retries a failure)
                await self.uninstalls.accept(body)
            return
        if isinstance(event, dict) and kind == "app_home_opened":
            self.on_home_opened(event, request_team(body))
            return
        if isinstance(event, dict) and event.get("type") == "agent_session_stopped":
            event_id = str(body.get("event_id") or "")
            if self.first_time(event_id):
                await self._unless_kept(event_id, self.controls.accept_stop_event(body))
            return
        message = parse_event(body, bot_user_id)
        if message is None or not self.first_time(message.event_id):
            return
        await self._unless_kept(message.event_id, self.inbox.accept_message(message))

    async def _unless_kept(self, event_id: str, store: Coroutine[Any, Any, Any]) -> None:
        """Store an event seen for the first time; if that fails (the database is down) Slack
        gets no 200 and sends it again, so its id is forgotten: the retry is not a duplicate."""
        try:
            await store
        except BaseException:
            self._seen.forget(event_id)
            raise

    def on_home_opened(self, event: dict[str, Any], team: str = "") -> None:
        """`app_home_opened` on the Home tab: publish that person's "Waiting for you" (on a
        task: the ack does not wait; nothing is stored, the list is read from the approvals)."""
        user = event.get("user")
        if event.get("tab", "home") != "home" or not isinstance(user, str) or not user:
            return
        self.spawn(self.home.publish(user, team), f"home of {user}")

    # the audit slash command ---------------------------------------------------------------

    def on_audit_command(self, body: dict[str, Any]) -> None:
        """`/chatops-audit [window] [connector] [share]`: the report for the viewer alone (an
        ephemeral message), in the channel with `share`; or a private note."""
        channel = body["channel_id"]
        direct = channel.startswith("D") or body.get("channel_name") == "directmessage"
        # the team it was asked in: whose audit viewers apply (as for the agent's report and
        # approvals); with OAuth installs the only workspace the report covers
        team = request_team(body)
        place = Place(PLATFORM, channel, direct=direct, workspace=team)
        self.spawn(self._audit(body["user_id"], place, body.get("text") or ""), "audit command")

    async def _audit(self, user_id: str, place: Place, text: str) -> None:
        reply = await self.ports.audit(user_id, f"audit {text}".strip(), place)
        channel, team = place.channel, place.workspace
        if reply is not None and reply.kind == "report" and reply.report is not None:
            try:
                if reply.shared:
                    where = ThreadRef(PLATFORM, team, channel, "") if team else None
                    await self.surface.post_audit_report(channel, reply.report, thread=where)
                else:
                    await self.surface.show_audit_report(
                        channel, user_id, reply.report, workspace=team
                    )
            except SlackApiError as exc:  # the one who asked must not be left waiting
                error = exc.response.get("error") or "an error"
                log.warning("slack: the audit report could not be posted: %s", error)
                note = (
                    f"The report could not be posted here (Slack said {error}); "
                    "`chatops audit` prints it."
                )
                await self.surface.tell(channel, user_id, note, workspace=team)
            return
        try:
            await self.surface.tell(
                channel, user_id, reply.message if reply else USAGE, workspace=team
            )
        except SlackApiError as exc:  # a channel or user Slack does not know: nobody to tell
            log.warning("slack: could not answer /chatops-audit: %s", exc.response.get("error"))


SLACK_INBOUND_KEY = web.AppKey("slack_inbound", SlackInbound)
SLACK_BOLT_KEY = web.AppKey("slack_bolt", AsyncApp)


def setup_slack(
    app: web.Application,
    ports: SurfacePorts,
    settings: Settings,
    *,
    meter: PlatformMeter | None = None,
    oauth_stores: OAuthStores | None = None,
) -> None:
    """Mount Slack on the aiohttp app: the events route, Socket Mode, the surface, shutdown;
    `meter`: where its Web API calls are counted (default: the metrics of this app alone);
    `oauth_stores`: where OAuth installs are kept (needed with SLACK_CLIENT_ID, `oauth.py`)."""
    problem = settings.slack_mode_problem()
    if problem is not None:
        raise StartupError(problem)
    if settings.slack_bot_token is None and not settings.slack_oauth:
        raise ValueError("SLACK_BOT_TOKEN is not set; Slack is off")
    limiter = UpdateLimiter(share=ports.live_processes)
    meter = meter or Metrics().platform("slack")
    token = settings.slack_bot_token
    client = MeteredWebClient(
        token=token.get_secret_value() if token is not None else None,
        base_url=settings.slack_api_url,
        retry_handlers=retry_handlers(limiter, meter),
        meter=meter,
    )
    oauth: SlackOAuth | None = None
    if settings.slack_oauth:
        if oauth_stores is None:
            raise StartupError("Slack OAuth installs need a store for the installations")
        oauth = build_oauth(settings, oauth_stores, client)
    features = WorkspaceFeatures(plan=settings.chatops_status_style == "plan")
    clients = oauth.clients if oauth is not None else None
    surface = SlackSurface(client, limiter, features=features, clients=clients)
    inbound = SlackInbound(ports, surface)
    surface.installation = inbound.installation  # the team a trigger's thread is opened in
    if oauth is not None:
        inbound.uninstalls = Uninstalls(oauth, ports.end_workspace)
        add_install_routes(app, oauth.flow)
    bolt = build_bolt_app(settings, inbound, client, oauth=oauth)
    app[SLACK_INBOUND_KEY] = inbound
    app[SLACK_BOLT_KEY] = bolt
    ports.register(surface)

    if settings.slack_signing_secret is not None:
        secret = settings.slack_signing_secret.get_secret_value()
        app.router.add_post("/slack/events", events_route(bolt, secret, inbound, ports.health))

    async def slack_lifecycle(app: web.Application) -> Any:
        # The chat platforms' client session (opened before us, closed after the runs have
        # ended): Web API calls reuse its connections. Without it slack_sdk opens one per call.
        client.session = app.get(PLATFORM_HTTP_KEY)
        socket: AsyncSocketModeHandler | None = None
        connect: Callable[[], Awaitable[None]] | None = None
        if settings.slack_app_token is not None:
            app_token = settings.slack_app_token.get_secret_value()
            socket = AsyncSocketModeHandler(bolt, app_token)
            connect = _socket_connector(client, socket, app_token)
        # auth.test, then the Socket Mode connection: in the background, retried while Slack
        # is unreachable; a refused token marks Slack down (one log line), the rest serves
        sign_in = slack_sign_in(inbound.installation, ports.health, connect_socket=connect)
        if oauth is None:
            sign_in.start()
        else:  # no token of its own: each workspace's is checked by Slack as it is used
            ports.health.up("slack")
        try:
            yield
        finally:
            await sign_in.close()
            if socket is not None:
                await socket.close_async()
            await inbound.close()
            await inbound.home.close()
            await surface.sessions.close()

    app.cleanup_ctx.append(slack_lifecycle)


def _socket_connector(
    client: AsyncWebClient, socket: AsyncSocketModeHandler, app_token: str
) -> Callable[[], Awaitable[None]]:
    """Socket Mode's handshake, checked: slack_sdk's own `connect` retries a refused app token
    forever with a traceback each time, so `apps.connections.open` is asked first (a refusal
    raises `SlackApiError` once), then the socket connects."""

    async def connect() -> None:
        await client.apps_connections_open(app_token=app_token)
        await socket.connect_async()

    return connect
