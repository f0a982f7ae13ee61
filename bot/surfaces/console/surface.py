"""The local web console: the embedded default surface, served by `chatops serve` at `GET /`.

A user types a request in the browser; it becomes an `InboundMessage` on the "console" platform
and goes through the `dispatch` port like a Slack mention. What the runtime posts (status,
approval cards, the answer, notices) is kept per message id and pushed to the page over SSE.

Who may reach it is `console_guard`'s job: a local browser only (no proxy), or anyone with
`CHATOPS_CONSOLE_TOKEN` when `CHATOPS_CONSOLE_PUBLIC=true`. The console decides only approvals
whose card it posted itself (the broker refuses the others).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from bot.config import Settings
from bot.engine.llm import LLM_NOT_CONFIGURED
from bot.runs.types import RunEvent, run_event_frame
from bot.surfaces.base import (
    AnswerFile,
    ApprovalCardView,
    CardPlace,
    InboundMessage,
    MessageRef,
    StatusView,
    SurfacePorts,
    ThreadRef,
    grant_button_label,
    grant_note,
)
from bot.surfaces.console.files import ROUTE as FILES_ROUTE
from bot.surfaces.console.files import ConsoleFiles
from bot.surfaces.console.guard import ConsoleGuard, check_console_settings
from bot.surfaces.console.page import PAGE

log = logging.getLogger(__name__)

PLATFORM = "console"
WORKSPACE = "local"
CHANNEL = "console"
DEFAULT_USER = "console-user"
APPROVALS_VIEW = ThreadRef(PLATFORM, WORKSPACE, CHANNEL, "approvals")  # routed cards: /#approvals
LLM_BANNER = LLM_NOT_CONFIGURED  # the one text, as the server's start-up log says it
MAX_TEXT_CHARS = 20_000
HEARTBEAT_S = 15.0
DECISIONS = ("approve", "reject", "approve_thread")
# DecisionResult.status -> HTTP status of the console's approval endpoint
DECISION_HTTP_STATUS = {
    "decided": 200,
    "recorded": 200,
    "already_decided": 409,
    "unauthorized": 403,
    "self_approval_refused": 403,
    "grant_refused": 403,
    "wrong_platform": 403,
    "not_found": 404,
    "wrong_card": 409,
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@dataclass(frozen=True)
class Outgoing:
    """One SSE event: `item` (a message's latest state), or a run event on its seed channel."""

    event: str
    data: dict[str, Any]


class ConsoleSurface:
    """The console as a `Surface`: keeps the latest state of every posted message, fans out SSE.

    Items are bounded (oldest dropped), and so is each subscriber's queue: a browser that stops
    reading is disconnected (EventSource reconnects and gets a fresh snapshot).
    """

    platform = PLATFORM
    report_poster = None  # no channels: scheduled audit reports go to Slack or Feishu

    def __init__(self, *, max_items: int = 500, queue_size: int = 1000) -> None:
        self._items: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._run_threads: OrderedDict[str, str] = OrderedDict()
        self.files = ConsoleFiles(max_items=max_items)  # the answers' documents
        self._subscribers: set[asyncio.Queue[Outgoing | None]] = set()
        self._max_items = max_items
        self._queue_size = queue_size
        self._seq = 0
        self._closed = False

    # -- what the page sees -------------------------------------------------------------
    def snapshot(self, root: str | None = None) -> list[dict[str, Any]]:
        """The latest state of each message, oldest first (optionally one thread only)."""
        items = sorted(self._items.values(), key=lambda item: item["created"])
        return [item for item in items if root is None or item["thread"] == root]

    def subscribe(self) -> asyncio.Queue[Outgoing | None]:
        queue: asyncio.Queue[Outgoing | None] = asyncio.Queue(self._queue_size)
        if self._closed:
            queue.put_nowait(None)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Outgoing | None]) -> None:
        self._subscribers.discard(queue)

    def close(self) -> None:
        """End every SSE stream (server shutdown)."""
        self._closed = True
        for queue in list(self._subscribers):
            self._end(queue)

    def _end(self, queue: asyncio.Queue[Outgoing | None]) -> None:
        self._subscribers.discard(queue)
        while True:
            try:
                queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                queue.get_nowait()

    def _publish(self, message_id: str, thread: ThreadRef, kind: str, data: dict[str, Any]) -> None:
        self._seq += 1
        previous = self._items.pop(message_id, None)
        item = {
            "id": message_id,
            "thread": thread.root,
            "kind": kind,
            "seq": self._seq,
            "created": previous["created"] if previous else self._seq,
            "data": json.loads(json.dumps(data, default=_jsonable)),
        }
        self._items[message_id] = item
        while len(self._items) > self._max_items:
            self._items.popitem(last=False)
        self._broadcast(Outgoing("item", item))

    def _broadcast(self, outgoing: Outgoing) -> None:
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(outgoing)
            except asyncio.QueueFull:
                log.warning("console: a browser stopped reading events; disconnecting it")
                self._end(queue)

    # -- live step events (not kept: the status item holds the lasting state) ----------------
    def track_run(self, run_id: str, root: str) -> None:
        """Remember which console thread a run belongs to, so its step events reach the page."""
        self._run_threads[run_id] = root
        while len(self._run_threads) > self._max_items:
            self._run_threads.popitem(last=False)

    def on_run_event(self, run_id: str, event: RunEvent) -> None:
        """RunManager listener: the events of console runs go out in the seed's protocol
        (`{type, status}` objects on the `step`, `answer`, `compact`, `phase`, `inject` and
        `done` channels), each with the run and the thread it belongs to."""
        root = self._run_threads.get(run_id)
        if root is None:
            return
        frame = run_event_frame(event)
        data = {**frame.data, "run_id": run_id, "thread": root}
        self._broadcast(Outgoing(frame.channel, json.loads(json.dumps(data, default=_jsonable))))

    def _new_ref(self, thread: ThreadRef) -> MessageRef:
        return MessageRef(thread=thread, message_id=uuid.uuid4().hex)

    # -- Surface protocol ---------------------------------------------------------------
    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        ref = self._new_ref(thread)
        self._publish(ref.message_id, thread, "status", asdict(view))
        return ref

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        self._publish(ref.message_id, ref.thread, "status", asdict(view))

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef:
        ref = self._new_ref(thread)
        self._publish(ref.message_id, thread, "approval", _approval_data(view))
        return ref

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None:
        self._publish(ref.message_id, ref.thread, "approval", _approval_data(view))

    async def post_answer(
        self, thread: ThreadRef, markdown: str, *, files: Sequence[AnswerFile] = ()
    ) -> MessageRef:
        """The answer item, with a link per document (kept and served by `ConsoleFiles`)."""
        ref = self._new_ref(thread)
        links = [self.files.keep(file) for file in files]
        self._publish(ref.message_id, thread, "answer", {"markdown": markdown, "files": links})
        return ref

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        ref = self._new_ref(thread)
        self._publish(ref.message_id, thread, "notice", {"text": text, "mention": list(mention)})
        return ref

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        ref = self._new_ref(thread)
        self._publish(ref.message_id, thread, "notice", {"text": text, "to": user_id})

    async def thread_link(self, thread: ThreadRef) -> str:
        return f"/#{thread.root}"  # the page opens the thread named in the hash

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        ref = self._new_ref(APPROVALS_VIEW)
        self._publish(ref.message_id, APPROVALS_VIEW, "approval", _approval_data(view))
        return ref

    async def post_routed_notice(self, thread: ThreadRef, _: Sequence[CardPlace]) -> MessageRef:
        return await self.post_notice(thread, "Waiting for approval in the approvals view.")


def _approval_data(view: ApprovalCardView) -> dict[str, Any]:
    """The card as the page gets it: the view, plus the grant sentence every surface shows."""
    return {**asdict(view), "grant_note": grant_note(view), "grant_label": grant_button_label(view)}


class ConsoleRoutes:
    """The console's HTTP handlers, bound to the surface's ports and one `ConsoleSurface`."""

    def __init__(self, ports: SurfacePorts, settings: Settings, surface: ConsoleSurface) -> None:
        self.ports = ports
        self.settings = settings
        self.surface = surface

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(
            text=PAGE,
            content_type="text/html",
            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"},
        )

    async def state(self, request: web.Request) -> web.Response:
        status = self.ports.status()
        return web.json_response(
            {
                "llm_configured": status.llm_configured,
                "banner": None if status.llm_configured else LLM_BANNER,
                "model": status.model,
                "tools": list(status.tools),
                "surfaces": list(status.surfaces),
                "skipped_connectors": list(status.skipped_connectors),
                "connectors_down": list(status.connectors_down),
                "items": self.surface.snapshot(request.query.get("thread")),
            }
        )

    async def post_message(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        text = str(body.get("text") or "").strip()
        if not text:
            return _error(400, "type a request first")
        if len(text) > MAX_TEXT_CHARS:
            return _error(413, f"a request is at most {MAX_TEXT_CHARS} characters")
        if not self.settings.llm_configured:
            return _error(503, LLM_BANNER)
        root = str(body.get("thread") or "") or uuid.uuid4().hex
        message = InboundMessage(
            thread=ThreadRef(PLATFORM, WORKSPACE, CHANNEL, root),
            event_id=f"console-{uuid.uuid4().hex}",
            user_id=_user(body),
            text=text,
            message_id=uuid.uuid4().hex,
        )
        outcome = await self.ports.dispatch(message, None)
        if outcome.run_id:
            self.surface.track_run(outcome.run_id, root)
        return web.json_response({"thread": root, "outcome": outcome.kind}, status=202)

    async def decide(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        decision = body.get("decision")
        if decision not in DECISIONS:
            return _error(400, f"decision must be one of {', '.join(DECISIONS)}")
        grantees = body.get("grantees")
        if grantees is not None and (
            not isinstance(grantees, list) or not all(isinstance(g, str) for g in grantees)
        ):
            return _error(400, "grantees must be a list of user names")
        result = await self.ports.decisions.decide(
            request.match_info["approval_id"],
            _user(body),
            decision,
            str(body.get("reason") or ""),
            platform=PLATFORM,
            grantees=grantees,
        )
        return web.json_response(
            {"status": result.status, "message": result.message},
            status=DECISION_HTTP_STATUS.get(result.status, 200),
        )

    async def events(self, request: web.Request) -> web.StreamResponse:
        """SSE: a snapshot of every message, then each change as it happens."""
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        queue = self.surface.subscribe()
        try:
            for item in self.surface.snapshot():
                await _send(response, Outgoing("item", item))
            async for outgoing in _drain(queue):
                if outgoing is None:
                    await response.write(b": ping\n\n")
                else:
                    await _send(response, outgoing)
        except ConnectionResetError:
            log.debug("console: a browser closed its event stream")
        finally:
            self.surface.unsubscribe(queue)
        return response


async def _drain(
    queue: asyncio.Queue[Outgoing | None],
) -> AsyncIterator[Outgoing | None]:
    """Items from the queue; None every HEARTBEAT_S when idle; stops at the end marker."""
    while True:
        try:
            item = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
        except TimeoutError:
            yield None
            continue
        if item is None:
            return
        yield item


async def _send(response: web.StreamResponse, outgoing: Outgoing) -> None:
    payload = json.dumps(outgoing.data)
    await response.write(f"event: {outgoing.event}\ndata: {payload}\n\n".encode())


async def _json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; JSON is UTF-8 whatever charset the Content-Type claims."""
    try:
        body = json.loads((await request.read()).decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested absurdly deep
        raise web.HTTPBadRequest(text="the body is not valid UTF-8 JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


def _user(body: dict[str, Any]) -> str:
    """Who the console user says they are (no auth: the console is local)."""
    user = str(body.get("user") or "").strip()[:64]
    return user or DEFAULT_USER


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def setup_console(app: web.Application, ports: SurfacePorts, settings: Settings) -> ConsoleSurface:
    """Mount the console at `/` and `/console/api/...` and register it with the run manager
    (a `StartupError` for a public console without a token)."""
    check_console_settings(settings)
    surface = ConsoleSurface()
    routes = ConsoleRoutes(ports, settings, surface)
    guard = ConsoleGuard(settings)
    app.router.add_get("/", guard.page(routes.page))
    app.router.add_get("/console/api/state", guard.api(routes.state))
    app.router.add_get("/console/api/events", guard.api(routes.events))
    app.router.add_post("/console/api/messages", guard.api(routes.post_message))
    app.router.add_get(FILES_ROUTE, guard.api(surface.files.serve))
    app.router.add_post("/console/api/approvals/{approval_id}", guard.api(routes.decide))
    ports.register(surface)
    ports.listen(surface.on_run_event)

    async def close_streams(_: web.Application) -> None:
        surface.close()

    app.on_shutdown.append(close_streams)
    return surface
