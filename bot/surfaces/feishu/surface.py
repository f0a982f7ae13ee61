"""The Feishu/Lark surface: lark-oapi events in (webhook or long connection), cards v2 out.

Inbound, both modes share one lark-oapi `EventDispatcherHandler` and the handlers here: in
webhook mode (`POST /feishu/events`) `inbound.WebhookRoute` checks the push first (`verify.py`)
and hands the SDK verified plaintext only; in long-connection mode (`FEISHU_MODE=longconn`)
`lark.ws.Client` runs in its own thread. Handlers run off the event loop and hand work to it
(`inbound.LoopBridge`). Nothing is acknowledged before it is stored: a message once the inbox
(`bot.inbox`) has committed it, a card click once its decision is committed; the click
then waits (at most 2.5 s in all) for the broker to apply it, because its answer carries the
toast and the updated card. Feishu wants both within three seconds.

Outbound, the surface replies in the conversation's thread (`reply_in_thread`) with cards from
`render.py` and `agent_cards.py`, edits status and approval cards in place by PATCH, and sends
private notes as cards only that person sees: Feishu's ephemeral card in a group chat (it has
no ephemeral message inside a thread, so the card shows in the chat), a card in a direct chat,
and a direct message when Feishu refuses the ephemeral card. See docs/feishu.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web
from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.chat.audit_report import AuditReport
from bot.chat.ports import AuditCommand, Decisions, Dispatch, InboxPort, Stop
from bot.chat.questions import Questions, QuestionView
from bot.chat.surface import AuditReportPoster
from bot.chat.threads import InboundMessage, MessageRef, ThreadRef
from bot.chat.views import AnswerFile, AnyCardView, ApprovalCardView, CardPlace, StatusView
from bot.config import Settings
from bot.recent_events import RecentEvents
from bot.surfaces.feishu.agent_cards import plan_status_card, with_feedback, with_stop
from bot.surfaces.feishu.apps import DEFAULT_NAME, FeishuApp, default_app
from bot.surfaces.feishu.audit_command import answer_audit_command
from bot.surfaces.feishu.audit_report import feishu_card
from bot.surfaces.feishu.batch_card import any_card
from bot.surfaces.feishu.callbacks import FeishuCallbacks
from bot.surfaces.feishu.events import PLATFORM, parse_message_event
from bot.surfaces.feishu.inbound import (
    LoopBridge,
    WebhookRoute,
    card_response,
    plaintext_dispatcher,
)
from bot.surfaces.feishu.longconn import LongConnection
from bot.surfaces.feishu.pending import answer_pending
from bot.surfaces.feishu.question_card import question_card
from bot.surfaces.feishu.render import (
    ANSWER_CHUNK_BYTES,
    answer_cards,
    approval_card,
    chat_link,
    private_card,
    routed_notice_text,
    status_card,
    text_content,
    toast,
)
from bot.surfaces.feishu.send import FeishuAPIError, FeishuSender
from bot.surfaces.feishu.stream import FeishuStream, TenantFeatures
from bot.surfaces.feishu.verify import WebhookVerifier

log = logging.getLogger(__name__)

MODES = ("webhook", "longconn")
SEEN_TTL_S = 3600.0  # Feishu re-pushes an unacknowledged event for hours; the inbox dedupes too
DIRECT_CHATS_TTL_S = 86400.0  # unknown (forgotten, another process): ephemeral refused, then DM
TOO_BIG_CODE = 230025  # Feishu: the request (a card) is over its size limit


def build_sender(settings: Settings, **options: Any) -> FeishuSender:
    """The sender for the FEISHU_* app (ValueError if FEISHU_DOMAIN is not an https origin)."""
    return FeishuSender.for_app(
        settings.feishu_app_id or "",
        _secret(settings.feishu_app_secret),
        settings.feishu_domain,
        **options,
    )


def app_sender(app: FeishuApp, **options: Any) -> FeishuSender:
    """The sender on this app's own lark-oapi client (ValueError for a bad domain)."""
    return FeishuSender.for_app(app.app_id, app.app_secret, app.domain, **options)


def _secret(value: Any) -> str:
    return value.get_secret_value() if value is not None else ""


def unconfigured_app(settings: Settings) -> FeishuApp:
    """FEISHU_APP_ID without a secret (surface-only tests): the app as far as it is set."""
    return FeishuApp(
        name=DEFAULT_NAME,
        app_id=settings.feishu_app_id or "",
        app_secret=_secret(settings.feishu_app_secret),
        verification_token=_secret(settings.feishu_verification_token) or None,
        encrypt_key=_secret(settings.feishu_encrypt_key) or None,
        domain=settings.feishu_domain,
        mode=settings.feishu_mode,
    )


def tenant_check(app: FeishuApp) -> Callable[[str], bool]:
    """An app of the apps file acts for its tenants only; the FEISHU_* app for any."""
    if not app.tenant_keys:
        return lambda tenant: True
    return app.tenant_keys.__contains__


class FeishuSurface:
    """Feishu/Lark as the runtime sees it (the `Surface` protocol) plus its inbound handlers."""

    platform = "feishu"
    status_edit_interval_s = None  # the run manager's: Feishu limits edits per message
    direct_messages = True  # a card to one person: a message to their open_id

    def __init__(
        self,
        settings: Settings,
        *,
        dispatch: Dispatch,
        inbox: InboxPort,
        audit: AuditCommand | None = None,
        stop: Stop | None = None,
        sender: FeishuSender | None = None,
        decide_budget_s: float = 2.5,
        decisions: Decisions | None = None,
        app: FeishuApp | None = None,
        serves: Callable[[str], bool] | None = None,
        route_inbox: bool = True,
        questions: Questions | None = None,
    ) -> None:
        """`dispatch`, `inbox`, `audit`, `stop`: the surface's ports (`SurfacePorts`); without
        `audit` chat audit commands go to the agent like any message, without `stop` the Stop
        button says it is not available. `app`: the app this surface is (default: FEISHU_*);
        `serves`: whether a tenant's events are this app's to act on (default: the app's
        tenant keys, or any tenant for the FEISHU_* app); `route_inbox`: take the platform's
        stored messages (False when `FeishuApps` hands them over by tenant); `questions`: where
        a tool's question is answered (`question_callbacks.py`)."""
        self._settings = settings
        self.app = app or default_app(settings) or unconfigured_app(settings)
        self._serves = serves or tenant_check(self.app)
        self._dispatch = dispatch
        self._inbox = inbox
        if route_inbox:
            inbox.route_messages(self.platform, self.on_message)
        self._audit = audit
        self._decisions = decisions
        self.sender = sender or app_sender(self.app)
        self._decide_budget_s = decide_budget_s
        self._seen = RecentEvents(ttl_s=SEEN_TTL_S)  # event and message ids
        # direct (p2p) chats seen in messages: a private note there is a plain card to the chat
        self._direct_chats = RecentEvents(ttl_s=DIRECT_CHATS_TTL_S)
        self._bridge = LoopBridge()
        self._callbacks = FeishuCallbacks(
            self._bridge, inbox, stop, decide_budget_s, decisions, questions
        )
        self.features = TenantFeatures()
        self._plan = settings.chatops_status_style == "plan"
        # parsing is quick, but a card click waits (<= decide_budget_s) for its decision
        self._inbound = ThreadPoolExecutor(32, thread_name_prefix="feishu-events")
        self.bot_open_id: str | None = None
        self.longconn: LongConnection | None = None
        # set by `setup_feishu`: waits for the start-up credential check, True when accepted
        self.signed_in: Callable[[], Awaitable[bool]] | None = None
        token = self.app.verification_token or ""
        self.dispatcher = (
            plaintext_dispatcher(token)
            .register_p2_im_message_receive_v1(self.handle_message_event)
            .register_p2_card_action_trigger(self.handle_card_action)
            .build()
        )
        verifier = WebhookVerifier(self.app.encrypt_key, token)
        self.handle_webhook = WebhookRoute(verifier, self.dispatcher, self._inbound).handle

    # ------------------------------------------------------------------ lifecycle

    async def lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        """cleanup_ctx: bind to the loop, learn the bot's open_id, run the long connection."""
        self._bridge.loop = asyncio.get_running_loop()
        try:
            self.bot_open_id = await self.sender.bot_open_id() or None
        except Exception:  # noqa: BLE001 - mentions are then recognised by mentioned_type
            log.warning("could not read the bot's open_id from Feishu; using mention types")
        self.longconn = None
        connecting: asyncio.Task[None] | None = None
        if self.app.mode == "longconn":
            connecting = asyncio.create_task(self._connect(), name="feishu-longconn-start")
        try:
            yield
        finally:
            if connecting is not None:
                connecting.cancel()
                await asyncio.gather(connecting, return_exceptions=True)
            if self.longconn is not None:
                await asyncio.to_thread(self.longconn.stop)
            try:  # events already acknowledged get their dispatch, briefly
                await self.wait_idle(2.0)
            except TimeoutError:
                log.warning("Feishu events still being dispatched at shutdown were cancelled")
            self._bridge.cancel_all()
            self._inbound.shutdown(wait=False, cancel_futures=True)
            self.sender.close()

    async def _connect(self) -> None:
        """The long connection, once the credentials were accepted (`signed_in`, when the
        server set it): with refused ones the SDK would reconnect forever, failing each time."""
        if self.signed_in is not None and not await self.signed_in():
            return
        self.longconn = LongConnection(
            self.app.app_id, self.app.app_secret, self.app.domain.rstrip("/"), self.dispatcher
        )
        self.longconn.start()

    # ------------------------------------------------------------------ inbound (SDK threads)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - like RunManager's
        """Wait until every event handed to the loop has been processed (tests, shutdown)."""
        await self._bridge.wait_idle(timeout)
        await self._inbox.wait_idle(timeout)

    def handle_message_event(self, data: P2ImMessageReceiveV1) -> None:
        """`im.message.receive_v1`: parse, drop duplicates, store in the inbox.

        Returns once the message is committed (the SDK acknowledges after this returns), not
        after its dispatch: under a burst of events, waiting for runs to start would push
        acknowledgements past Feishu's three seconds. If it cannot be stored in time the
        handler raises, so Feishu gets an error and pushes the event again.
        """
        if not self._for_this_app(data):
            log.warning("feishu event for another app ignored")
            return
        parsed = parse_message_event(data, self.bot_open_id)
        message = parsed.message
        if message is None:
            log.debug("feishu message ignored: %s", parsed.reason)
            return
        if message.direct:
            self._direct_chats.add_if_new(message.thread.channel)
        keys = (f"event:{message.event_id}", f"message:{message.message_id}")
        if not self._seen.add_if_new(*keys):
            log.info("feishu duplicate ignored: %s", message.event_id)
            return
        try:
            self._bridge.schedule(self._inbox.accept_message(message)).result(self._decide_budget_s)
        except BaseException:  # not stored: Feishu pushes it again, and that push is taken
            self._seen.forget(*keys)
            raise

    async def on_message(self, message: InboundMessage, inbox_id: int) -> None:
        """The inbox hands a stored message back here: an audit command, `pending` (the
        sender's inbox), or the run manager."""
        domain = self.app.domain
        if await answer_pending(self, self._decisions, message, domain):
            await self._inbox.done(inbox_id)
            return
        if message.mentions_bot and await answer_audit_command(self, self._audit, message):
            await self._inbox.done(inbox_id)
            return
        outcome = await self._dispatch(message, inbox_id)
        log.info("feishu message %s: %s", message.message_id, getattr(outcome, "kind", outcome))

    def _for_this_app(self, data: P2ImMessageReceiveV1 | P2CardActionTrigger) -> bool:
        """The event or callback names this app (`header.app_id`) and a tenant it serves: one
        signed for another app (a shared encrypt key, a misrouted push, a replay on another
        app's webhook) is not ours to act on."""
        header = data.header
        return (
            header is not None
            and header.app_id == self.app.app_id
            and isinstance(header.tenant_key, str)
            and self._serves(header.tenant_key)
        )

    def handle_card_action(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """`card.action.trigger`: an approval decision, a Stop or a rating (`callbacks.py`),
        for the verified operator; a callback for another app is refused."""
        if not self._for_this_app(data):
            return card_response(toast("error", "This button is not an approval decision."))
        return self._callbacks.handle(data)

    # ------------------------------------------------------------------ outbound (Surface)

    def _status_card(self, view: StatusView) -> dict[str, Any]:
        """A plan of tasks (`CHATOPS_STATUS_STYLE=plan`) or the checklist, with Stop while live."""
        return plan_status_card(view) if self._plan else with_stop(status_card(view), view)

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        message_id = await self.sender.reply(thread.root, "interactive", self._status_card(view))
        return MessageRef(thread, message_id)

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self.sender.patch(ref.message_id, self._status_card(view))

    async def open_answer_stream(self, thread: ThreadRef, *, recipient: str) -> FeishuStream | None:
        """A CardKit card to stream the answer into (None where the app cannot: one post)."""
        if not thread.root or not self.features.streams(thread.workspace):
            return None
        return FeishuStream(self, thread)

    async def post_approval_card(self, thread: ThreadRef, view: AnyCardView) -> MessageRef:
        message_id = await self.sender.reply(thread.root, "interactive", any_card(view))
        return MessageRef(thread, message_id)

    async def update_approval_card(self, ref: MessageRef, view: AnyCardView) -> None:
        await self.sender.patch(ref.message_id, any_card(view))

    async def post_question(self, thread: ThreadRef, view: QuestionView) -> MessageRef:
        """A tool's question (`QuestionPoster`): a form card in the thread."""
        message_id = await self.sender.reply(thread.root, "interactive", question_card(view))
        return MessageRef(thread, message_id)

    async def update_question(self, ref: MessageRef, view: QuestionView) -> None:
        await self.sender.patch(ref.message_id, question_card(view))

    async def thread_link(self, thread: ThreadRef) -> str:
        return chat_link(self.app.domain, thread.channel)

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        """A copy in an approvals chat (`chat_id`) or an approver's DM (`open_id`/`user_id`)."""
        kind = "chat_id" if place.kind == "channel" else "open_id"
        if place.kind == "dm" and not place.target.startswith("ou_"):
            kind = "user_id"  # an approver named by user id rather than open id
        mid, chat = await self.sender.send(kind, place.target, "interactive", approval_card(view))
        return MessageRef(ThreadRef(PLATFORM, place.workspace, chat or place.target, ""), mid)

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        return await self.post_notice(thread, routed_notice_text(places))

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        """The answer as cards in the thread (split under the size limit; the last one carries
        the feedback buttons with `feedback_run`), then each document as a file message; the
        first card's ref, or with `feedback_run` the last one's.

        Should Feishu refuse a card as too big anyway (230025), its text goes again as cards
        four times smaller, so the run never fails for the size of its answer.
        """
        ids: list[str] = []
        cards = answer_cards(markdown)
        for i, card in enumerate(cards):
            last = feedback_run and i == len(cards) - 1
            try:
                ids.append(
                    await self.sender.reply(
                        thread.root, "interactive", with_feedback(card) if last else card
                    )
                )
            except FeishuAPIError as exc:
                if exc.code != TOO_BIG_CODE:
                    raise
                log.warning("feishu refused an answer card as too big; sending smaller ones")
                text = card["body"]["elements"][0]["content"]
                smaller = answer_cards(text, chunk_bytes=ANSWER_CHUNK_BYTES // 4)
                for j, piece in enumerate(smaller):
                    piece = with_feedback(piece) if last and j == len(smaller) - 1 else piece
                    ids.append(await self.sender.reply(thread.root, "interactive", piece))
        await self.attach_all(thread, files)
        return MessageRef(thread, ids[-1] if feedback_run else ids[0])

    async def attach_all(self, thread: ThreadRef, files: Sequence[AnswerFile]) -> None:
        for file in files:
            await self._attach(thread, file)

    async def _attach(self, thread: ThreadRef, file: AnswerFile) -> None:
        """A document as a file message in the thread (upload, then a `file` message); a
        refused upload is said in the thread instead."""
        try:
            key = await self.sender.upload_file(file.name, file.data)
            await self.sender.reply(thread.root, "file", {"file_key": key})
        except FeishuAPIError as exc:
            log.warning("feishu refused the document %s (code %s)", file.name, exc.code)
            note = f"The document {file.name} could not be attached (code {exc.code})."
            await self.sender.reply(thread.root, "text", text_content(note))

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        message_id = await self.sender.reply(thread.root, "text", text_content(text, mention))
        return MessageRef(thread, message_id)

    async def open_thread(self, channel: str, workspace: str, text: str) -> ThreadRef:
        """A trigger's alert summary in the chat `channel`, the root of the thread it starts
        (`ThreadOpener`); `workspace`: the tenant key the chat's events carry."""
        message_id = await self.sender.create("chat_id", channel, "text", text_content(text))
        return ThreadRef(self.platform, workspace, channel, message_id)

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        """A card only `user_id` sees: in a group chat Feishu's ephemeral card ("only visible
        to you", in the chat the thread is in); in a direct chat a card to that chat. Should
        Feishu refuse the ephemeral card (a topic group, the person not in the chat), or the
        chat be unknown, the card goes as a direct message to the person instead."""
        card = private_card(text)
        if thread.channel and self._direct_chats.has(thread.channel):
            await self.sender.create("chat_id", thread.channel, "interactive", card)
            return
        if thread.channel:
            try:
                await self.sender.send_ephemeral(thread.channel, user_id, card)
                return
            except FeishuAPIError as exc:
                log.info("feishu refused an ephemeral card (code %s); sent as a DM", exc.code)
        kind = "open_id" if user_id.startswith("ou_") else "user_id"
        await self.sender.create(kind, user_id, "interactive", card)

    @property
    def report_poster(self) -> AuditReportPoster:
        """Feishu posts scheduled audit reports (`post_audit_report`)."""
        return self

    async def post_audit_report(
        self,
        channel: str,
        report: AuditReport,
        *,
        thread: ThreadRef | None = None,
        workspace: str = "",
    ) -> MessageRef:
        """An audit report card in a chat (`channel` is a chat_id), or in a thread (this
        app's token; `workspace`: the tenant, which the router picked the app by)."""
        card = feishu_card(report)
        if thread is not None:
            return MessageRef(thread, await self.sender.reply(thread.root, "interactive", card))
        message_id = await self.sender.create("chat_id", channel, "interactive", card)
        return MessageRef(ThreadRef(self.platform, "", channel, message_id), message_id)


FEISHU_KEY = web.AppKey("feishu_surface", FeishuSurface)  # the first app's (FEISHU_* when set)
