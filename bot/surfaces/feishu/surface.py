"""The Feishu/Lark surface: lark-oapi events in (webhook or long connection), cards v2 out.

Inbound, both modes share one lark-oapi `EventDispatcherHandler`: in webhook mode
(`POST /feishu/events`) it answers the url_verification challenge, checks the verification
token, decrypts `{"encrypt": ...}` bodies and checks `X-Lark-Signature` with the encrypt key
(webhook mode needs one: requests are signed with it, and a signed request older than five
minutes is refused as a replay); in long-connection mode (`FEISHU_MODE=longconn`)
`lark.ws.Client` runs in its own thread and calls the same handlers. The SDK is synchronous,
so it runs off the event loop (a thread pool, or the long-connection thread) and hands work to
the loop with `asyncio.run_coroutine_threadsafe`. Nothing is acknowledged before it is stored:
a message is answered once the inbox (`bot.runs.inbox`) has committed it, a card click once its
decision is committed; the click then waits (at most 2.5 s in all) for the broker to apply it,
because its answer carries the toast and the updated card. Feishu wants both within three
seconds.

Outbound, the surface replies in the conversation's thread (`reply_in_thread`) with cards from
`feishu_render`, edits status and approval cards in place by PATCH, and sends private notes as
direct messages (Feishu has no ephemeral message in threads, and a DM also reaches users who
are not in the chat). See docs/feishu.md for setting up the app.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import lark_oapi as lark
from aiohttp import web
from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.core.const import (
    LARK_REQUEST_NONCE,
    LARK_REQUEST_SIGNATURE,
    LARK_REQUEST_TIMESTAMP,
    X_REQUEST_ID,
)
from lark_oapi.core.model import RawRequest
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.audit.model import AuditReport, Place
from bot.config import Settings
from bot.errors import StartupError
from bot.runs.inbox import DecisionRecord
from bot.runs.types import RecentEvents
from bot.surfaces.base import (
    AnswerFile,
    ApprovalCardView,
    AuditCommand,
    AuditReportPoster,
    CardPlace,
    Dispatch,
    InboundMessage,
    InboxPort,
    MessageRef,
    StatusView,
    SurfacePorts,
    ThreadRef,
)
from bot.surfaces.feishu.audit_report import feishu_card
from bot.surfaces.feishu.events import (
    PLATFORM,
    decrypted_event,
    event_shape_ok,
    parse_card_action,
    parse_message_event,
    signature_ok,
    timestamp_fresh,
)
from bot.surfaces.feishu.longconn import LongConnection
from bot.surfaces.feishu.render import (
    ANSWER_CHUNK_BYTES,
    answer_cards,
    approval_card,
    chat_link,
    routed_notice_text,
    status_card,
    text_content,
    toast,
)
from bot.surfaces.feishu.send import FeishuAPIError, FeishuSender

log = logging.getLogger(__name__)

T = TypeVar("T")
_FORWARDED_HEADERS = (
    LARK_REQUEST_TIMESTAMP,
    LARK_REQUEST_NONCE,
    LARK_REQUEST_SIGNATURE,
    X_REQUEST_ID,
)
# Messages lark-oapi's dispatcher answers with when a request fails verification or decryption.
_AUTH_FAILURES = (
    "invalid verification_token",
    "signature verification failed",
    "encrypt_key not found",
    "ciphertext",
    "padding",
    "Incorrect padding",
)
_TOAST_KIND = {"decided": "success", "recorded": "success", "already_decided": "info"}
MODES = ("webhook", "longconn")
HANDLED_EVENTS = frozenset({"im.message.receive_v1", "card.action.trigger"})
SEEN_TTL_S = 3600.0  # Feishu re-pushes an unacknowledged event for hours; the inbox dedupes too
TOO_BIG_CODE = 230025  # Feishu: the request (a card) is over its size limit


def build_sender(settings: Settings, **options: Any) -> FeishuSender:
    """The sender for the configured app (ValueError if FEISHU_DOMAIN is not an https origin)."""
    return FeishuSender.for_app(
        settings.feishu_app_id or "",
        _secret(settings.feishu_app_secret),
        settings.feishu_domain,
        **options,
    )


def _secret(value: Any) -> str:
    return value.get_secret_value() if value is not None else ""


class FeishuSurface:
    """Feishu/Lark as the runtime sees it (the `Surface` protocol) plus its inbound handlers."""

    platform = "feishu"

    def __init__(
        self,
        settings: Settings,
        *,
        dispatch: Dispatch,
        inbox: InboxPort,
        audit: AuditCommand | None = None,
        sender: FeishuSender | None = None,
        decide_budget_s: float = 2.5,
    ) -> None:
        """`dispatch`, `inbox`, `audit`: the surface's ports (`SurfacePorts`); without `audit`
        chat audit commands go to the agent like any message."""
        self._settings = settings
        self._dispatch = dispatch
        self._inbox = inbox
        inbox.route_messages(self.platform, self._on_message)
        self._audit = audit
        self.sender = sender or build_sender(settings)
        self._decide_budget_s = decide_budget_s
        self._seen = RecentEvents(ttl_s=SEEN_TTL_S)  # event and message ids
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._pending_lock = threading.Lock()
        # decryption is quick, but a card click waits (<= decide_budget_s) for its decision
        self._inbound = ThreadPoolExecutor(32, thread_name_prefix="feishu-events")
        self.bot_open_id: str | None = None
        self.longconn: LongConnection | None = None
        self.dispatcher = (
            lark.EventDispatcherHandler.builder(
                _secret(settings.feishu_encrypt_key), _secret(settings.feishu_verification_token)
            )
            .register_p2_im_message_receive_v1(self.handle_message_event)
            .register_p2_card_action_trigger(self.handle_card_action)
            .build()
        )

    # ------------------------------------------------------------------ lifecycle

    async def lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        """cleanup_ctx: bind to the loop, learn the bot's open_id, run the long connection."""
        self._loop = asyncio.get_running_loop()
        try:
            self.bot_open_id = await self.sender.bot_open_id() or None
        except Exception:  # noqa: BLE001 - mentions are then recognised by mentioned_type
            log.warning("could not read the bot's open_id from Feishu; using mention types")
        longconn = self.longconn = None
        if self._settings.feishu_mode == "longconn":
            longconn = self.longconn = LongConnection(
                self._settings.feishu_app_id or "",
                _secret(self._settings.feishu_app_secret),
                self._settings.feishu_domain.rstrip("/"),
                self.dispatcher,
            )
            longconn.start()
        try:
            yield
        finally:
            if longconn is not None:
                await asyncio.to_thread(longconn.stop)
            try:  # events already acknowledged get their dispatch, briefly
                await self.wait_idle(2.0)
            except TimeoutError:
                log.warning("Feishu events still being dispatched at shutdown were cancelled")
            with self._pending_lock:
                pending = list(self._pending)
            for future in pending:
                future.cancel()
            self._inbound.shutdown(wait=False, cancel_futures=True)
            self.sender.close()

    # ------------------------------------------------------------------ webhook

    async def handle_webhook(self, request: web.Request) -> web.Response:
        """`POST /feishu/events`: verification, decryption and dispatch by lark-oapi."""
        raw = RawRequest()
        raw.uri = request.path
        raw.body = await request.read()
        raw.headers = {h: request.headers[h] for h in _FORWARDED_HEADERS if h in request.headers}
        encrypt_key = self._settings.feishu_encrypt_key
        if encrypt_key is None:
            # without the key nothing is signed: a click would be trusted on the static
            # verification token alone (setup_feishu refuses to start like this)
            return web.json_response({"msg": "FEISHU_ENCRYPT_KEY is not set"}, status=401)
        unsigned = not all(h in raw.headers for h in _FORWARDED_HEADERS[:3])
        if unsigned:
            # Feishu sends url_verification unsigned even with an encrypt key; lark-oapi answers
            # it (token checked) before it checks signatures, which blanks fail for the rest.
            for header in _FORWARDED_HEADERS[:3]:
                raw.headers[header] = ""
        elif not signature_ok(raw, _secret(encrypt_key)):
            return web.json_response({"msg": "signature verification failed"}, status=401)
        elif not timestamp_fresh(raw.headers[LARK_REQUEST_TIMESTAMP], time.time()):
            # a signed request recorded and sent again later (a replay), as Slack's check refuses
            return web.json_response({"msg": "request timestamp is too old"}, status=401)
        try:
            json.loads(raw.body)
        except ValueError:
            status = 401 if unsigned else 400
            return web.json_response({"msg": "body is not JSON"}, status=status)
        if not unsigned:
            refusal = self._refusal(decrypted_event(raw.body, _secret(encrypt_key)))
            if refusal is not None:
                return refusal
        loop = asyncio.get_running_loop()
        resp = await loop.run_in_executor(self._inbound, self.dispatcher.do, raw)
        status = resp.status_code or 500
        content = resp.content or b"{}"
        if status >= 400 and (unsigned or any(m.encode() in content for m in _AUTH_FAILURES)):
            status = 401
        elif status >= 400 and b"processor not found" in content:
            # verified, but an event this app does not handle: acknowledge so it is not re-pushed
            return web.json_response({"msg": "ignored"})
        return web.Response(status=status, body=content, content_type="application/json")

    def _refusal(self, event: Any) -> web.Response | None:
        """What the route answers a signed push itself, before the SDK sees it: one the SDK
        could not parse (400), a wrong verification token (401), a type this bot does not
        handle (200, so Feishu does not push it again). The SDK would log each as an error."""
        if not event_shape_ok(event):
            return web.json_response({"msg": "malformed event"}, status=400)
        header = event.get("header") if isinstance(event.get("header"), dict) else {}
        token = header.get("token", event.get("token"))
        if token != _secret(self._settings.feishu_verification_token):
            return web.json_response({"msg": "invalid verification_token"}, status=401)
        kind = header.get("event_type")
        if not isinstance(kind, str) or kind not in HANDLED_EVENTS:
            return web.json_response({"msg": "ignored"})
        return None

    # ------------------------------------------------------------------ inbound (SDK threads)

    def _schedule(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Hand `coro` to the app's loop from an SDK thread; tracked until done."""
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            raise RuntimeError("the Feishu surface is not running")
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("SDK handlers must run off the event loop")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._forget_future)
        return future

    def _forget_future(self, future: concurrent.futures.Future[Any]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - like RunManager's
        """Wait until every event handed to the loop has been processed (tests, shutdown)."""
        with self._pending_lock:
            pending = [asyncio.wrap_future(f) for f in self._pending]
        if pending:
            await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), timeout)
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
        keys = (f"event:{message.event_id}", f"message:{message.message_id}")
        if not self._seen.add_if_new(*keys):
            log.info("feishu duplicate ignored: %s", message.event_id)
            return
        self._schedule(self._inbox.accept_message(message)).result(self._decide_budget_s)

    async def _on_message(self, message: InboundMessage, inbox_id: int) -> None:
        """The inbox hands a stored message back here: an audit command, or the run manager."""
        if message.mentions_bot and await self._answer_audit_command(message):
            await self._inbox.done(inbox_id)
            return
        outcome = await self._dispatch(message, inbox_id)
        log.info("feishu message %s: %s", message.message_id, getattr(outcome, "kind", outcome))

    def _for_this_app(self, data: P2ImMessageReceiveV1 | P2CardActionTrigger) -> bool:
        """The event or callback names this app (`header.app_id`): one signed for another app
        (a shared encrypt key, a misrouted push) is not ours to act on."""
        header = data.header
        return header is not None and header.app_id == self._settings.feishu_app_id

    def handle_card_action(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """`card.action.trigger`: the broker decides for the verified operator; toast + card."""
        click = parse_card_action(data) if self._for_this_app(data) else None
        if click is None:
            return _card_response(toast("error", "This button is not an approval decision."))
        record = DecisionRecord(
            platform=self.platform,
            approval_id=click.approval_id,
            user_id=click.operator_id,
            decision=click.decision,  # type: ignore[arg-type] - parse_card_action checked it
            reason=click.reason,
            card=click.card(),
        )
        deadline = time.monotonic() + self._decide_budget_s
        try:
            stored = self._schedule(self._inbox.accept_decision(record)).result(
                self._decide_budget_s
            )
        except Exception:
            log.exception("storing the decision on approval %s failed", click.approval_id)
            return _card_response(toast("error", "Your answer could not be recorded; try again."))
        try:
            result = self._schedule(_within(stored, deadline - time.monotonic())).result()
        except (TimeoutError, concurrent.futures.TimeoutError):
            return _card_response(
                toast("info", "Your answer is recorded; the card will update shortly.")
            )
        except Exception:
            log.exception("deciding approval %s failed", click.approval_id)
            return _card_response(toast("info", "Your answer is recorded; it will be applied."))
        kind = _TOAST_KIND.get(result.status, "error")
        card = approval_card(result.view) if result.view is not None and kind != "error" else None
        return _card_response(toast(kind, result.message), card)

    # ------------------------------------------------------------------ outbound (Surface)

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        message_id = await self.sender.reply(thread.root, "interactive", status_card(view))
        return MessageRef(thread, message_id)

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self.sender.patch(ref.message_id, status_card(view))

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef:
        message_id = await self.sender.reply(thread.root, "interactive", approval_card(view))
        return MessageRef(thread, message_id)

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None:
        await self.sender.patch(ref.message_id, approval_card(view))

    async def thread_link(self, thread: ThreadRef) -> str:
        return chat_link(self._settings.feishu_domain, thread.channel)

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
        self, thread: ThreadRef, markdown: str, *, files: Sequence[AnswerFile] = ()
    ) -> MessageRef:
        """The answer as cards in the thread (split under the size limit), then each document
        as a file message; the first card's ref.

        Should Feishu refuse a card as too big anyway (230025), its text goes again as cards
        four times smaller, so the run never fails for the size of its answer.
        """
        ids: list[str] = []
        for card in answer_cards(markdown):
            try:
                ids.append(await self.sender.reply(thread.root, "interactive", card))
            except FeishuAPIError as exc:
                if exc.code != TOO_BIG_CODE:
                    raise
                log.warning("feishu refused an answer card as too big; sending smaller ones")
                text = card["body"]["elements"][0]["content"]
                for smaller in answer_cards(text, chunk_bytes=ANSWER_CHUNK_BYTES // 4):
                    ids.append(await self.sender.reply(thread.root, "interactive", smaller))
        for file in files:
            await self._attach(thread, file)
        return MessageRef(thread, ids[0])

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

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        """A direct message from the bot (needs the user to be in the app's availability)."""
        await self.sender.create("open_id", user_id, "text", text_content(text))

    @property
    def report_poster(self) -> AuditReportPoster:
        """Feishu posts scheduled audit reports (`post_audit_report`)."""
        return self

    async def post_audit_report(
        self, channel: str, report: AuditReport, *, thread: ThreadRef | None = None
    ) -> MessageRef:
        """An audit report card in a chat (`channel` is a chat_id), or in a thread."""
        card = feishu_card(report)
        if thread is not None:
            return MessageRef(thread, await self.sender.reply(thread.root, "interactive", card))
        message_id = await self.sender.create("chat_id", channel, "interactive", card)
        return MessageRef(ThreadRef(self.platform, "", channel, message_id), message_id)

    async def _answer_audit_command(self, message: InboundMessage) -> bool:
        """`audit 7d [connector] [share]` to the bot: a report without the model, for viewers
        only; sent to the viewer by direct message, posted in the thread with `share`."""
        words = message.text.split(maxsplit=1)
        # only "audit ..." here: a chat message that merely starts with "7d" is for the agent
        if self._audit is None or not words or words[0].lower() != "audit":
            return False
        place = Place(self.platform, message.thread.channel, direct=message.direct)
        reply = await self._audit(message.user_id, message.text, place)
        if reply is None:
            return False
        if reply.kind == "report" and reply.report is not None and reply.shared:
            await self.post_audit_report(
                message.thread.channel, reply.report, thread=message.thread
            )
        elif reply.kind == "report" and reply.report is not None:
            card = feishu_card(reply.report)
            await self.sender.create("open_id", message.user_id, "interactive", card)
        else:
            await self.notify_user(message.thread, message.user_id, reply.message)
        return True


async def _within(future: asyncio.Future[T], seconds: float) -> T:
    """The decision once applied, or TimeoutError (the stored decision is applied regardless)."""
    return await asyncio.wait_for(asyncio.shield(future), max(seconds, 0.0))


def _card_response(
    toast_body: dict[str, str], card: dict[str, Any] | None = None
) -> P2CardActionTriggerResponse:
    body: dict[str, Any] = {"toast": toast_body}
    if card is not None:
        body["card"] = {"type": "raw", "data": card}
    return P2CardActionTriggerResponse(body)


FEISHU_KEY = web.AppKey("feishu_surface", FeishuSurface)


def setup_feishu(app: web.Application, ports: SurfacePorts, settings: Settings) -> None:
    """Mount the Feishu surface: its route (webhook mode), its cleanup_ctx, its registration."""
    if settings.feishu_mode not in MODES:
        raise StartupError(f"FEISHU_MODE must be one of {', '.join(MODES)}")
    # Feishu puts the Verification Token in every push; lark-oapi refuses a push whose token
    # it cannot compare, so an encrypt key alone would start a bot that refuses every event.
    if settings.feishu_mode == "webhook" and settings.feishu_verification_token is None:
        raise StartupError(
            "Feishu webhook mode needs FEISHU_VERIFICATION_TOKEN and FEISHU_ENCRYPT_KEY, "
            "or FEISHU_MODE=longconn"
        )
    # Without the encrypt key nothing a webhook receives is signed, and an approval click would
    # be trusted on the static verification token alone (sent in every push, so anyone who saw
    # one push could forge clicks).
    if settings.feishu_mode == "webhook" and settings.feishu_encrypt_key is None:
        raise StartupError(
            "Feishu webhook mode needs FEISHU_ENCRYPT_KEY (set an Encrypt Key under Events & "
            "Callbacks > Encryption Strategy): without it requests are not signed and card "
            "clicks could be forged; or use FEISHU_MODE=longconn"
        )
    try:
        sender = build_sender(settings)
    except ValueError:  # lark-oapi refuses a domain that is not an https origin
        raise StartupError(
            "FEISHU_DOMAIN must be an https origin such as https://open.feishu.cn or "
            "https://open.larksuite.com (plain http only for 127.0.0.1 test servers)"
        ) from None
    surface = FeishuSurface(
        settings, dispatch=ports.dispatch, inbox=ports.inbox, audit=ports.audit, sender=sender
    )
    app[FEISHU_KEY] = surface
    if settings.feishu_mode == "webhook":
        app.router.add_post("/feishu/events", surface.handle_webhook)
    app.cleanup_ctx.append(surface.lifecycle)
    ports.register(surface)
