"""Feishu inbound plumbing: the webhook route, and the bridge from SDK threads to the loop.

`POST /feishu/events` (webhook mode) is checked by `verify.WebhookVerifier` first: signature,
timestamp, decryption and token by Feishu's documented algorithms. lark-oapi's
`EventDispatcherHandler` then gets the verified plaintext only, with no `encrypt` field and no
signature headers, so it does no cryptography of its own and its error texts decide nothing;
it parses the event into its model types and calls the surface's handlers, as in
long-connection mode. Those handlers are synchronous and run in worker threads; `LoopBridge`
hands their work to the app's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar, assert_never

import lark_oapi as lark
from aiohttp import web
from lark_oapi.core.const import X_REQUEST_ID
from lark_oapi.core.model import RawRequest
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTriggerResponse
from lark_oapi.event.dispatcher_handler import EventDispatcherHandlerBuilder

from bot.surfaces.feishu.events import event_shape_ok
from bot.surfaces.feishu.verify import Challenge, Refusal, Verified, WebhookVerifier

log = logging.getLogger(__name__)

T = TypeVar("T")
HANDLED_EVENTS = frozenset({"im.message.receive_v1", "card.action.trigger"})


def plaintext_dispatcher(verification_token: str | None) -> EventDispatcherHandlerBuilder:
    """lark-oapi's dispatcher builder without the encrypt key: given plaintext it decrypts
    nothing and checks no signature (ours did); it still compares the token, already checked."""
    return lark.EventDispatcherHandler.builder("", verification_token or "")


class WebhookRoute:
    """`POST /feishu/events`: verify, answer the URL check, hand verified events to lark-oapi."""

    def __init__(
        self,
        verifier: WebhookVerifier,
        dispatcher: lark.EventDispatcherHandler,
        executor: Executor,
    ) -> None:
        self._verifier = verifier
        self._dispatcher = dispatcher
        self._executor = executor

    async def handle(self, request: web.Request) -> web.Response:
        """The route's handler (a coroutine function, as aiohttp wants)."""
        verdict = self._verifier.verify(await request.read(), request.headers)
        match verdict:
            case Refusal(status=status, message=message):
                log.warning("feishu push refused (%d): %s", status, message)
                return web.json_response({"msg": message}, status=status)
            case Challenge(challenge=challenge):
                return web.json_response({"challenge": challenge})
            case Verified():
                return await self._dispatch(request, verdict)
            case _:
                assert_never(verdict)

    async def _dispatch(self, request: web.Request, verdict: Verified) -> web.Response:
        """A verified push: malformed (400), of a type this bot does not handle (200, so Feishu
        does not push it again), or parsed and handled by lark-oapi in a worker thread."""
        if not event_shape_ok(verdict.payload):
            log.warning("feishu push refused (400): malformed event")
            return web.json_response({"msg": "malformed event"}, status=400)
        if verdict.event_type not in HANDLED_EVENTS:
            return web.json_response({"msg": "ignored"})
        raw = RawRequest()
        raw.uri = request.path
        raw.body = verdict.plaintext
        request_id = request.headers.get(X_REQUEST_ID)  # for the SDK's log lines only
        raw.headers = {X_REQUEST_ID: request_id} if request_id is not None else {}
        loop = asyncio.get_running_loop()
        resp = await loop.run_in_executor(self._executor, self._dispatcher.do, raw)
        if resp.status_code is None or resp.status_code >= 400:
            # a handler raised (the SDK logged it): Feishu should push the event again
            return web.json_response({"msg": "the event could not be handled"}, status=500)
        body = resp.content or b"{}"
        return web.Response(status=resp.status_code, body=body, content_type="application/json")


class LoopBridge:
    """Hands coroutines from SDK threads to the app's loop and keeps them until they finish."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()

    def schedule(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; only from a thread other than the loop's own."""
        loop = self.loop
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
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - like RunManager's
        """Wait until every coroutine handed over so far has finished."""
        with self._lock:
            pending = [asyncio.wrap_future(f) for f in self._pending]
        if pending:
            await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), timeout)

    def cancel_all(self) -> None:
        """Cancel what is still pending (shutdown)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()


async def within(future: asyncio.Future[T], seconds: float) -> T:
    """The decision once applied, or TimeoutError (the stored decision is applied regardless)."""
    return await asyncio.wait_for(asyncio.shield(future), max(seconds, 0.0))


def card_response(
    toast_body: dict[str, str], card: dict[str, Any] | None = None
) -> P2CardActionTriggerResponse:
    """A card click's answer: the toast, and the card to show in place of the clicked one."""
    body: dict[str, Any] = {"toast": toast_body}
    if card is not None:
        body["card"] = {"type": "raw", "data": card}
    return P2CardActionTriggerResponse(body)
